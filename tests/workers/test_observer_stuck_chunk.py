"""A chunk that always fails does not block the chunks after it (issue 18 item 4 review):
after CHUNK_FAILURES_BEFORE_SPLIT failures in a row it is retried smaller, and a single
message that still fails is recorded as skipped. Also: a run whose every observation was
rejected says so."""

from __future__ import annotations

import re
from typing import Any

from prism_om.core.records import OBSERVATIONS_RECORDED
from prism_om.debug import OBSERVER_MESSAGE_SKIPPED, OBSERVER_OBSERVATIONS_REJECTED
from prism_om.providers import ScriptedProvider
from prism_om.providers.base import ProviderError, ProviderRequest
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.workers import create_observational_memory_runtime
from prism_om.workers.runtime import CHUNK_FAILURES_BEFORE_SPLIT

ENTRY_HEADER = re.compile(r"^\[entry (\S+) \|", re.MULTILINE)
POISON = "the filter refuses this"


class Observer:
    """Answers each observer run with one observation citing every message shown, and
    fails (like a content filter) every run whose prompt holds ``POISON``."""

    def __init__(self, *, cite: str | None = None) -> None:
        self.shown: list[list[str]] = []
        self.failed: list[list[str]] = []
        self.cite = cite  # cite this id instead (outside the chunk: rejected)

    def __call__(self, request: ProviderRequest) -> list[Any]:
        last = request.messages[-1]
        if last.role != "user":
            return [{"text": "done"}]
        ids = ENTRY_HEADER.findall(last.content)
        if POISON in last.content:
            self.failed.append(ids)
            return [ProviderError("blocked by the content filter")]
        self.shown.append(ids)
        cited = [self.cite] if self.cite else ids
        arguments = {"observations": [{"text": f"{len(ids)} messages", "sourceEntryIds": cited}]}
        return [{"tool_call": {"name": "record_observations", "arguments": arguments}}]


async def chat(store: SessionStore, count: int, poison: set[int]) -> tuple[Session, list[str]]:
    session = Session(store, "chat")
    ids = []
    for i in range(count):
        text = f"Message {i}: Melanie booked {i + 2} seats for the concert in July."
        if i in poison:
            text += f" {POISON}."
        entry = await session.append_message("user" if i % 2 == 0 else "assistant", text)
        ids.append(entry.id)
    return session, ids


def runtime(session: Session, observer: Observer, events: list[tuple[str, dict[str, Any]]]) -> Any:
    return create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={
            "provider": ScriptedProvider([observer] * 500),
            "model": "m",
            "message_tokens": 200,
        },
        debug=lambda event, data: events.append((event, data)),
    )


async def records(session: Session) -> list[dict[str, Any]]:
    return [
        e.data
        for e in await session.store.list(session.id)
        if e.custom_type == OBSERVATIONS_RECORDED and e.data is not None
    ]


async def test_a_message_that_always_fails_is_skipped_and_later_chunks_proceed(
    store: SessionStore,
) -> None:
    session, ids = await chat(store, 40, poison={13})
    observer = Observer()
    events: list[tuple[str, dict[str, Any]]] = []
    memory = runtime(session, observer, events)
    flushes = []
    for _ in range(20):
        flushes.append(await memory.flush(force=True))
        if flushes[-1].status == "completed":
            break
    # A transient-looking failure only loses its chunk: the first flushes fail as before.
    assert [f.status for f in flushes[:CHUNK_FAILURES_BEFORE_SPLIT]] == ["failed"] * (
        CHUNK_FAILURES_BEFORE_SPLIT
    )
    done = flushes[-1]
    assert done.status == "completed", [f.error for f in flushes]
    outcome = done.outcome("observer")
    assert outcome is not None and outcome.skipped_ids == (ids[13],)
    assert any(ids[13] in w and "skipped" in w for w in done.warnings)
    assert (OBSERVER_MESSAGE_SKIPPED, {"entryId": ids[13], "recordId": outcome.entry_ids[0]}) in [
        (e, {k: d[k] for k in ("entryId", "recordId") if k in d}) for e, d in events
    ]
    # The skip is a coverage record that says so, with no observation.
    # (Less its metadata: the tokens the runs spent, tests/workers/test_worker_usage.py.)
    skips = [
        {k: v for k, v in r.items() if k != "metadata"}
        for r in await records(session)
        if r.get("skippedEntryIds")
    ]
    assert skips == [
        {
            "type": OBSERVATIONS_RECORDED,
            "observations": [],
            "coversUpToId": ids[13],
            "skippedEntryIds": [ids[13]],
        }
    ]
    # Every other message was observed exactly once; the poisoned one never.
    observed = [i for shown in observer.shown for i in shown]
    assert sorted(observed) == sorted(i for n, i in enumerate(ids) if n != 13)
    assert len(observed) == len(set(observed))
    assert all(ids[13] in failed for failed in observer.failed)
    live = await store.live_ledger("chat")
    after = await store.entries_after("chat", live.observation_covers_up_to_id)
    assert not [e for e in after if e.kind == "message"]


async def test_a_transient_failure_does_not_shrink_or_skip(store: SessionStore) -> None:
    session, ids = await chat(store, 12, poison=set())
    observer = Observer()
    calls = {"n": 0}

    def flaky(request: ProviderRequest) -> list[Any]:
        calls["n"] += 1
        if calls["n"] == 1:
            return [ProviderError("overloaded")]
        return observer(request)

    memory = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": ScriptedProvider([flaky] * 50), "model": "m"},
    )
    assert (await memory.flush(force=True)).status == "failed"
    second = await memory.flush(force=True)
    assert second.status == "completed"
    outcome = second.outcome("observer")
    assert outcome is not None and outcome.skipped_ids == ()
    assert observer.shown == [ids]  # the whole chunk again, not a smaller one


async def test_a_run_whose_observations_were_all_rejected_says_so(store: SessionStore) -> None:
    session, ids = await chat(store, 4, poison=set())
    observer = Observer(cite="not-in-this-chunk")
    events: list[tuple[str, dict[str, Any]]] = []
    result = await runtime(session, observer, events).flush(force=True)
    outcome = result.outcome("observer")
    assert outcome is not None and outcome.status == "ran" and outcome.memory_ids == ()
    assert outcome.rejected >= 1
    assert any("rejected" in w for w in result.warnings)
    rejected = [d for e, d in events if e == OBSERVER_OBSERVATIONS_REJECTED]
    assert rejected and rejected[0]["coversUpToId"] == ids[-1]


async def test_an_outage_never_splits_or_skips_however_long_it_lasts(store: SessionStore) -> None:
    # A provider that answers 503 (or times out) for the chunk with the poisoned message,
    # many flushes in a row: an outage, not a refusal of this content. Skipping there would
    # cost a readable message its observation, so every flush fails and nothing is skipped.
    session, _ = await chat(store, 40, poison={13})
    observer = Observer()
    outage = [
        ProviderError("HTTP 503 from POST /v1/chat/completions", status=503),
        ProviderError("timed out after 30s", transient=True),
    ]

    def unavailable(request: ProviderRequest) -> list[Any]:
        answer = observer(request)
        if answer and isinstance(answer[0], ProviderError):
            return [outage[len(observer.failed) % 2]]
        return answer

    events: list[tuple[str, dict[str, Any]]] = []
    memory = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={
            "provider": ScriptedProvider([unavailable] * 500),
            "model": "m",
            "message_tokens": 200,
        },
        debug=lambda event, data: events.append((event, data)),
    )
    flushes = [await memory.flush(force=True) for _ in range(4 * CHUNK_FAILURES_BEFORE_SPLIT)]
    assert {f.status for f in flushes[1:]} == {"failed"}
    assert not [r for r in await records(session) if r.get("skippedEntryIds")]
    assert OBSERVER_MESSAGE_SKIPPED not in [e for e, _ in events]
    # Every failing chunk was tried at full size: the same messages each time.
    assert len({tuple(f) for f in observer.failed}) == 1


def test_which_provider_errors_are_transient() -> None:
    assert ProviderError("x", status=503).transient and ProviderError("x", status=429).transient
    assert ProviderError("x", status=408).transient
    assert not ProviderError("x", status=400).transient  # a refusal of this content
    assert not ProviderError("x").transient and ProviderError("x", transient=True).transient
