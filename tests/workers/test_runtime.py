"""create_observational_memory_runtime: selection, skips, failures, branch checks, a big flush."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from prism_om.entries import SessionEntry, custom_entry
from prism_om.errors import BranchMismatchError, InvalidInputError, RemovedSettingError
from prism_om.observational_memory import fold_observational_memory_ledger
from prism_om.providers import DoneEvent, ProviderEvent, ProviderRequest, ScriptedProvider
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.workers import (
    RECORD_OBSERVATIONS,
    RECORD_REFLECTIONS,
    Model,
    create_observational_memory_runtime,
    parse_observation_lines,
    parse_transcript,
)
from prism_om.workers.model import resolve_input_cap

MODEL = Model("m1", "acme", context_window=1000, max_output_tokens=200)


def scripted_memory(request: ProviderRequest) -> list[dict[str, Any]]:
    """Observe each user message; reflect over everything shown; one turn only."""
    if len(request.messages) > 1:
        return []
    prompt = request.messages[0].content
    name = request.tools[0].name
    if name == RECORD_OBSERVATIONS:
        items = [
            {"text": f"User said {e.text}", "sourceEntryIds": [e.id]}
            for e in parse_transcript(prompt)
            if e.role == "user"
        ]
        return [{"tool_call": {"name": name, "arguments": {"observations": items}}}]
    if name == RECORD_REFLECTIONS:
        ids = [o.id for o in parse_observation_lines(prompt)]
        item = {"text": f"{len(ids)} observations", "observationIds": ids}
        return [{"tool_call": {"name": name, "arguments": {"reflections": [item]}}}]
    return []


def memory_provider(turns: int = 400) -> ScriptedProvider:
    return ScriptedProvider([scripted_memory] * turns, then="stop")


async def make_session(messages: int = 6) -> Session:
    session = Session(MemoryStore(), "s1")
    for i in range(messages):
        role = "user" if i % 2 == 0 else "assistant"
        await session.append_message(role, f"message {i} about the billing migration")
    return session


def runtime(session: Session, provider: Any = None, **kwargs: Any) -> Any:
    kwargs.setdefault("observation", {"provider": provider or memory_provider()})
    kwargs.setdefault("session_model", MODEL)
    return create_observational_memory_runtime(
        session=session, append_entry=session.append, **kwargs
    )


class RecordingProvider:
    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: ProviderRequest) -> AsyncGenerator[ProviderEvent, None]:
        self.calls += 1
        yield DoneEvent()


async def test_building_a_runtime_calls_nothing() -> None:
    provider = RecordingProvider()
    resolver_calls: list[str] = []

    async def resolver(pid: str) -> str | None:
        resolver_calls.append(pid)
        return "k"

    session = await make_session()
    before = await session.entries()
    runtime(session, provider, credential_resolver=resolver)
    assert provider.calls == 0 and resolver_calls == []
    assert await session.entries() == before


async def test_no_worker_provider_fails_at_construction() -> None:
    session = await make_session()
    with pytest.raises(InvalidInputError):
        create_observational_memory_runtime(session=session, append_entry=session.append)


async def test_removed_setting_in_option_dict_fails_first() -> None:
    session = await make_session()
    with pytest.raises(RemovedSettingError):
        runtime(session, observation={"workerModel": "x", "provider": memory_provider()})


async def test_flush_records_observations_with_coverage_and_correlation() -> None:
    session = await make_session()
    provider = memory_provider()
    rt = runtime(session, provider, settings={"observation": {"messageTokens": 1}})
    result = await rt.flush()
    assert result.status == "completed" and len(result.observation_ids) == 3
    ledger = await session.store.ledger(session.id)
    branch = await session.entries()
    assert ledger.observation_covers_up_to_id == branch[5].id
    request = provider.requests[0]
    assert request.correlation_id == "om:s1" and request.model == "m1"


async def test_below_threshold_and_force() -> None:
    session = await make_session()
    rt = runtime(session)
    assert (await rt.flush()).outcome("observer").reason == "below_threshold"  # type: ignore[union-attr]
    assert len((await rt.flush(force=True)).observation_ids) == 3


async def test_host_session_id_wins_and_overrides_set_thinking() -> None:
    session = await make_session()
    provider = memory_provider()
    rt = runtime(
        session,
        provider,
        observation={"provider": provider, "thinking_level": "high"},
        overrides={"sessionId": "host-1", "thinkingLevel": "low"},
    )
    await rt.flush(force=True)
    assert provider.requests[0].correlation_id == "host-1"
    assert provider.requests[0].thinking_level == "low"


async def test_missing_model_and_require_explicit_model() -> None:
    session = await make_session()
    rt = runtime(session, session_model=None)
    assert (await rt.flush(force=True)).outcome("observer").reason == "missing_model"  # type: ignore[union-attr]
    rt = runtime(
        session,
        observation={"provider": memory_provider(), "require_explicit_model": True},
    )
    assert (await rt.flush(force=True)).outcome("observer").reason == "missing_model"  # type: ignore[union-attr]


async def test_credentials_use_resolved_model_provider_and_skip_when_missing() -> None:
    asked: list[str] = []

    async def resolver(pid: str) -> str | None:
        asked.append(pid)
        return None

    session = await make_session()
    rt = runtime(session, credential_resolver=resolver)
    out = (await rt.flush(force=True)).outcome("observer")
    assert out is not None and out.reason == "missing_credential" and asked == ["acme"]
    assert (await session.store.ledger(session.id)).observations == ()


async def test_provider_failure_sets_last_error_and_next_flush_retries() -> None:
    session = await make_session()
    provider = ScriptedProvider([[{"error": "down sk-KEY"}], scripted_memory], then="stop")
    rt = runtime(session, provider, secrets=["sk-KEY"])
    result = await rt.flush(force=True)
    assert result.status == "failed" and rt.last_error and "sk-KEY" not in rt.last_error
    assert (await session.store.ledger(session.id)).observation_coverage is None
    result = await rt.flush(force=True)
    assert result.status == "completed" and rt.last_error is None
    assert len(result.observation_ids) == 3


async def test_concurrent_flush_is_skipped() -> None:
    gate = asyncio.Event()

    async def slow(request: ProviderRequest) -> list[dict[str, Any]]:
        await gate.wait()
        return []

    session = await make_session()
    rt = runtime(session, ScriptedProvider([slow], then="stop"))
    first = asyncio.create_task(rt.flush(force=True))
    await asyncio.sleep(0.01)
    assert rt.in_flight
    second = await rt.flush(force=True)
    assert (second.status, second.reason) == ("skipped", "in_flight")
    gate.set()
    assert (await first).status == "completed" and not rt.in_flight


async def test_append_elsewhere_raises_branch_mismatch_and_restores_leaf() -> None:
    session = await make_session()

    async def wrong(entry: SessionEntry) -> None:
        return None  # wrote somewhere else entirely

    rt = create_observational_memory_runtime(
        session=session,
        append_entry=wrong,
        observation={"provider": memory_provider()},
        session_model=MODEL,
    )
    leaf = await session.leaf()
    with pytest.raises(BranchMismatchError):
        await rt.flush(force=True)
    assert await session.leaf() == leaf and rt.last_error

    async def other_branch(entry: SessionEntry) -> None:
        await session.store.append(entry)
        await session.store.checkout(session.id, (await session.entries())[0].id)

    rt = create_observational_memory_runtime(
        session=session,
        append_entry=other_branch,
        observation={"provider": memory_provider()},
        session_model=MODEL,
    )
    with pytest.raises(BranchMismatchError):
        await rt.flush(force=True)
    assert await session.leaf() == leaf


async def test_new_memory_is_bound_to_the_current_scope_when_host_scopes_exist() -> None:
    session = await make_session()
    await session.append_custom({"type": "om.scope.opened", "id": "task:a"})
    await session.append_custom({"type": "om.scope.entered", "scopeId": "task:a"})
    await session.append_message("user", "the scoped message")
    rt = runtime(session)
    result = await rt.flush(force=True)
    scopes = await session.store.scope_map(session.id)
    refs = {f"om:{i}" for i in result.observation_ids}
    assert refs and refs <= set(scopes.scopes["task:a"].binds)
    assert result.outcome("dropper").reason == "host_scopes"  # type: ignore[union-attr]


async def test_lowest_relevance_dropper_runs_without_a_model_call() -> None:
    session = await make_session(40)
    provider = memory_provider()
    rt = runtime(
        session,
        provider,
        settings={
            # The cap holds the rendered memory (its title and per-line ids included).
            "context": {"observationsPoolMaxTokens": 150, "observationsPoolTargetTokens": 80},
            "dropper": {"policy": "lowest-relevance"},
        },
    )
    result = await rt.flush(force=True)
    assert result.dropped_observation_ids
    ledger = await session.store.ledger(session.id)
    active = [r for r in ledger.observations if r.id not in ledger.dropped_observation_ids]
    assert sum(len(r.observation.text) for r in active) > 0
    assert all(r.observation.id for r in active)
    assert {r.tools[0].name for r in provider.requests} == {RECORD_OBSERVATIONS}


async def test_model_dropper_tops_up_to_hold_the_pool_cap() -> None:
    session = await make_session(40)
    rt = runtime(
        session,
        dropper={"provider": ScriptedProvider([], then="stop")},
        settings={"context": {"observationsPoolMaxTokens": 50, "observationsPoolTargetTokens": 20}},
    )
    result = await rt.flush(force=True)
    assert result.dropped_observation_ids


def test_resolve_input_cap() -> None:
    assert resolve_input_cap(MODEL) == 800
    with pytest.raises(InvalidInputError):
        resolve_input_cap(Model("x", "y"))


async def test_two_thousand_message_flush_reads_back_exactly() -> None:
    store = MemoryStore()
    session = Session(store, "big")
    parent = None
    batch = []
    for i in range(2000):
        role = "user" if i % 2 == 0 else "assistant"
        entry = (
            custom_entry("big", {"type": "host.note", "n": i}, parent_id=parent, entry_id=f"b{i}")
            if i % 97 == 50
            else __import__("prism_om").message_entry(
                "big",
                role,
                f"turn {i}: deploy budget {i * 3} for tenant t{i % 7}",
                parent_id=parent,
                entry_id=f"b{i}",
            )
        )
        batch.append(entry)
        parent = entry.id
    await store.append_many(batch)
    provider = memory_provider()
    rt = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": provider},
        reflection={"provider": provider},
        session_model=MODEL,
        settings={"observation": {"messageTokens": 1000}, "reflection": {"observationTokens": 100}},
        max_worker_message_bytes=64 * 1024,
    )
    result = await rt.flush()
    assert result.status == "completed"
    observer = result.outcome("observer")
    assert observer is not None and observer.runs > 1  # split across runs
    branch = await session.entries()
    ledger = fold_observational_memory_ledger(branch)
    assert ledger == await store.ledger("big")
    user_ids = {e.id for e in batch if e.message is not None and e.message.role == "user"}
    observed = {s for r in ledger.observations for s in r.observation.source_entry_ids}
    assert observed == user_ids
    assert ledger.observation_covers_up_to_id == "b1999"
    assert len(ledger.reflections) >= 1
    reflected = {i for r in ledger.reflections for i in r.reflection.observation_ids}
    assert reflected == {r.id for r in ledger.observations}
    assert ledger.reflection_coverage is not None
    # Nothing left: a second flush observes nothing.
    again = await rt.flush()
    assert again.outcome("observer").reason == "nothing_to_observe"  # type: ignore[union-attr]
