"""Activation: the attached agent, its post-run pipeline and every compact-when path."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from prism_om.attach import COMPACTION_TRIGGER_ERROR, CompactionContext, create_observational_memory
from prism_om.core.projection import active_memory
from prism_om.core.relevance import observation_pool_tokens
from prism_om.errors import AmbiguousInputError, InvalidInputError, RemovedSettingError
from prism_om.host import Agent
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    recall_observational_memory,
)
from prism_om.providers import ProviderRequest, ScriptedProvider, TextEvent
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.testing.conformance import StoreOpener, snapshot
from prism_om.tokens import get_estimator
from prism_om.workers import Model, OfflineMemoryProvider

FACTS = [
    "Dana owns the billing migration and it ships on 2026-12-04.",
    "The staging budget is 4200 EUR per month, decided by Sam.",
    "We chose Postgres 16 over MySQL because of logical replication.",
    "Release 3.2 is blocked on ticket 881 until the vendor answers.",
]


OFFLINE = OfflineMemoryProvider()
POOL_MAX_TOKENS = 600
# Framing, headings and the six recent messages around the observation pool.
SLACK_TOKENS = 1_500


def echo_provider() -> ScriptedProvider:
    """The agent's model: answers every prompt with a short acknowledgement."""

    def reply(request: ProviderRequest) -> list[Any]:
        last = request.messages[-1].content if request.messages else ""
        return [TextEvent(f"Noted: {last[:60]}")]

    return ScriptedProvider([reply] * 2000)


def memory(**overrides: Any) -> Any:
    settings: dict[str, Any] = {
        "observation": {"provider": OFFLINE, "model": "offline", "message_tokens": 150},
        "reflection": {"provider": OFFLINE, "model": "offline", "observation_tokens": 400},
        "dropper": {"policy": "lowest-relevance"},
        "context": {
            "compact_after_tokens": 1500,
            "recent_messages": 6,
            "observations_pool_max_tokens": POOL_MAX_TOKENS,
            "observations_pool_target_tokens": 400,
        },
    }
    settings.update(overrides.pop("settings", {}))
    return create_observational_memory(settings, **overrides)


async def test_a_long_session_observes_reflects_compacts_and_recalls(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        session = Session(store, "long")
        agent = Agent(session, echo_provider(), system="You are a release assistant.")
        attached = memory().attach(agent)
        budgets: list[int] = []
        estimator = get_estimator()
        for turn in range(300):
            text = FACTS[turn % len(FACTS)] if turn % 3 == 0 else f"Status check {turn}: all green."
            await attached.agent.run(text)
            request = await agent.request_preview("next")
            text = request.system + "".join(m.content for m in request.messages)
            # Observations are held to the pool cap by the dropper; reflections are never
            # dropped (the specification keeps them), so they are budgeted as they are.
            _, reflections = active_memory(await store.ledger("long"))
            allowed = POOL_MAX_TOKENS + SLACK_TOKENS
            allowed += sum(estimator.count(r.reflection.text) + 20 for r in reflections)
            budgets.append(allowed - estimator.count(text))
        ledger = await store.ledger("long")
        assert ledger.observations, "observations recorded after the threshold"
        assert ledger.reflections, "a reflection after its threshold"
        # The blocks stand for the history, so the request holds system text, memory and
        # recent messages: nothing a compaction shrinks. The token gate reports that
        # rather than compacting turn after turn; an explicit compaction still folds.
        assert attached.compactions == []
        compaction = await attached.agent.compact()
        assert compaction.data is not None and compaction.data["strategy"] == "observational-memory"
        kept = compaction.data["keepEntryIds"]
        assert len(kept) == 6
        # The summary is the rendered memory; the context stays bounded turn after turn.
        assert compaction.summary and "Observations" in compaction.summary
        assert min(budgets) >= 0, "context over its budget on some turn"
        pool = [r.observation for r in active_memory(ledger)[0]]
        assert observation_pool_tokens(pool, estimator) <= POOL_MAX_TOKENS
        # An early fact is recalled exactly by id, after compaction, with its source.
        first = ledger.observations[0]
        recalled = await recall_observational_memory(store, first.id, session_id="long")
        assert recalled.found
        sources = recalled.to_json()["sources"]
        assert sources and all(s["sessionId"] == "long" for s in sources)
        assert first.observation.source_entry_ids[0] in {s["id"] for s in sources}
    finally:
        await store.close()


async def test_context_blocks_reach_the_provider() -> None:
    session = Session(MemoryStore(), "ctx")
    provider = echo_provider()
    agent = Agent(session, provider)
    attached = memory().attach(agent)
    for fact in FACTS * 3:
        await attached.agent.run(fact)
    request = provider.requests[-1]
    assert "<observational-memory>" in request.system
    assert "<recent-messages>" in request.system
    # The raw tail is not sent again: only the current turn follows the blocks.
    assert [m.role for m in request.messages] == ["user"]
    blocks = await build_observational_memory_context_blocks(
        store := session.store, session_id="ctx", keep_recent_entries=6
    )
    assert blocks and blocks[0].name == "observational-memory"
    assert store is session.store


@pytest.mark.parametrize(
    ("trigger", "fires"),
    [
        ({"type": "tokens", "tokens": 1500}, True),
        ({"type": "tokens", "tokens": 10_000_000}, False),
        ({"type": "entries", "count": 4}, True),
        ({"type": "entries", "count": 10_000}, False),
        ({"type": "input_ratio", "ratio": 0.2}, True),
        ({"type": "input_ratio", "ratio": 0.99}, False),
        ({"type": "never"}, False),
    ],
)
async def test_each_trigger(trigger: dict[str, Any], fires: bool) -> None:
    session = Session(MemoryStore(), "trig")
    # Long answers: the history grows much faster than the memory that stands for it.
    answer = "Noted. " + "Here is the detailed release checklist with every step spelled out " * 12
    agent = Agent(session, ScriptedProvider([[TextEvent(answer)]] * 100))
    model = Model(id="m", provider="p", context_window=10_000, max_output_tokens=2_000)
    # Passive: the agent replays its history, which a compaction shrinks; the token
    # gates compact only when that brings the next request under their threshold. The
    # observer waits: the summary stays small next to the history it replaces.
    waiting = {"provider": OFFLINE, "model": "offline", "message_tokens": 10**9}
    quiet = {"passive": True, "observation": waiting, "reflection": {}}
    attached = memory(trigger=trigger, settings=quiet).attach(agent, session_model=model)
    for fact in FACTS * 3:
        await attached.agent.run(fact)
    assert bool(attached.compactions) is fires
    if fires:
        data = attached.compactions[0].data
        assert data is not None and data["trigger"] == trigger["type"]


async def test_should_compact_replaces_the_token_gate() -> None:
    seen: list[tuple[int, int]] = []

    def gate(context: CompactionContext) -> bool:
        seen.append((context.entry_count, context.estimated_input_tokens))
        return context.entry_count >= 6

    session = Session(MemoryStore(), "gate")
    agent = Agent(session, echo_provider())
    attached = memory(
        should_compact=gate, settings={"context": {"compact_after_tokens": 1}}
    ).attach(agent)
    await attached.agent.run(FACTS[0])
    assert not attached.compactions  # the 1-token default gate was replaced
    for fact in FACTS[1:]:
        await attached.agent.run(fact)
    assert attached.compactions and seen[0][0] >= 2


async def test_reading_the_cap_without_a_window_decides_false() -> None:
    events: list[tuple[str, dict[str, Any]]] = []

    def gate(context: CompactionContext) -> bool:
        return context.estimated_input_tokens / context.input_cap_tokens > 0.0

    session = Session(MemoryStore(), "cap")
    agent = Agent(session, echo_provider())
    om = memory(should_compact=gate, debug=lambda e, d: events.append((e, d)))
    attached = om.attach(agent, session_model=Model(id="m", provider="p"))
    for fact in FACTS:
        await attached.agent.run(fact)
    assert not attached.compactions
    assert any(name == COMPACTION_TRIGGER_ERROR for name, _ in events)


async def test_gate_configuration_fails_at_creation() -> None:
    with pytest.raises(InvalidInputError):
        memory(trigger={"type": "sometimes"})
    with pytest.raises(InvalidInputError):
        memory(trigger={"type": "tokens", "tokens": -1})
    with pytest.raises(InvalidInputError):
        memory(should_compact="yes")
    with pytest.raises(AmbiguousInputError):
        memory(trigger={"type": "never"}, should_compact=lambda c: False)
    with pytest.raises(RemovedSettingError, match=r"context\.compactAfterTokens"):
        create_observational_memory(compactAfterTokens=10)
    agent = Agent(Session(MemoryStore(), "ratio"), echo_provider())
    with pytest.raises(InvalidInputError):
        memory(trigger={"type": "input_ratio", "ratio": 0.5}).attach(
            agent, session_model=Model(id="m", provider="p")
        )


async def test_flush_during_a_run_skips_with_run_active() -> None:
    session = Session(MemoryStore(), "busy")
    results: list[Any] = []
    attached_box: list[Any] = []

    async def reply(request: ProviderRequest) -> list[Any]:
        results.append(await attached_box[0].flush())
        return [TextEvent("ok")]

    agent = Agent(session, ScriptedProvider([reply]))
    attached = memory().attach(agent)
    attached_box.append(attached)
    await attached.agent.run("hello there")
    assert results[0].status == "skipped" and results[0].reason == "run_active"


async def test_background_post_run_and_drain() -> None:
    session = Session(MemoryStore(), "bg")
    agent = Agent(session, echo_provider())
    attached = memory(background=True).attach(agent)
    for fact in FACTS * 2:
        await attached.agent.run(fact)
    await attached.drain()
    assert (await session.store.ledger("bg")).observations


async def test_a_failing_worker_never_fails_the_users_call() -> None:
    session = Session(MemoryStore(), "fail")
    broken = ScriptedProvider([[{"error": "model exploded"}]] * 50)
    agent = Agent(session, echo_provider())
    om = create_observational_memory(
        {"observation": {"provider": broken, "model": "x", "message_tokens": 10}}
    )
    attached = om.attach(agent)
    reply = await attached.agent.prompt(FACTS[0])
    assert reply.startswith("Noted")
    assert attached.runtime.last_error and "exploded" in attached.runtime.last_error
    assert (await session.store.ledger("fail")).observation_coverage is None


async def test_append_entry_pointing_elsewhere_is_caught_and_leaves_the_session(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        session = Session(store, "mine")
        other = Session(store, "other")
        await other.append_message("user", "someone else's conversation")
        agent = Agent(session, echo_provider())

        async def wrong(entry: Any) -> None:
            await store.append(
                entry.model_copy(update={"session_id": "other", "parent_id": await other.leaf()})
            )

        events: list[str] = []
        om = memory(debug=lambda e, d: events.append(e))
        attached = om.attach(agent, append_entry=wrong)
        for fact in FACTS:
            await attached.agent.run(fact)
        ledger = await store.ledger("mine")
        assert ledger.observations == ()
        assert [e.role for e in await session.entries()] == ["user", "assistant"] * len(FACTS)
        assert "observational-memory:post-run-error" in events
    finally:
        await store.close()


async def test_attach_and_create_start_nothing() -> None:
    calls: list[str] = []

    class Recording(OfflineMemoryProvider):
        def generate(self, request: ProviderRequest) -> Any:
            calls.append("generate")
            return super().generate(request)

    store = MemoryStore()
    before = await snapshot(store)
    agent = Agent(Session(store, "idle"), echo_provider())
    memory(settings={"observation": {"provider": Recording(), "model": "offline"}}).attach(agent)
    await asyncio.sleep(0)
    assert calls == [] and await snapshot(store) == before


async def test_wrap_resume_run_and_stream_run_the_pipeline_after() -> None:
    session = Session(MemoryStore(), "resume")
    agent = Agent(session, echo_provider())
    attached = memory(
        settings={"observation": {"provider": OFFLINE, "model": "offline", "message_tokens": 1}}
    ).attach(agent)

    async def resume() -> str:
        await session.append_message("user", FACTS[1])
        return "resumed"

    assert await attached.agent.wrap_resume_run(resume) == "resumed"
    first = await session.store.ledger("resume")
    assert first.observations, "the pipeline ran after the resumed run"

    async def resume_stream() -> Any:
        await session.append_message("user", FACTS[2])
        yield TextEvent("more")

    events = [e async for e in attached.agent.wrap_resume_stream(resume_stream)]
    assert [e.text for e in events if isinstance(e, TextEvent)] == ["more"]
    second = await session.store.ledger("resume")
    assert len(second.observations) > len(first.observations)
