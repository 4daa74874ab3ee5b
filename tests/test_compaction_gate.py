"""The compaction gate estimates the next request as it will be sent, in the settings' encoding."""

from __future__ import annotations

import math
from typing import Any

import pytest

from prism_om.attach import COMPACTION_INSUFFICIENT, CompactionContext, create_observational_memory
from prism_om.entries import compaction_entry
from prism_om.host import Agent
from prism_om.host.context import (
    estimate_request_tokens,
    history_since_compaction,
    load_history_since_compaction,
)
from prism_om.providers import ProviderRequest, ScriptedProvider, TextEvent
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.testing.conformance import StoreOpener
from prism_om.tokens import MESSAGE_OVERHEAD_TOKENS, get_estimator
from prism_om.workers import Model, OfflineMemoryProvider

OFFLINE = OfflineMemoryProvider()
SYSTEM = "You are the release assistant of the Atlas team. " * 12
FACTS = [
    "Dana owns the billing migration and it ships on 2026-12-04.",
    "The staging budget is 4200 EUR per month, decided by Sam.",
    "We chose Postgres 16 over MySQL because of logical replication.",
    "Release 3.2 is blocked on ticket 881 until the vendor answers.",
    "Priya runs the load test on Thursday with 3000 virtual users.",
]
# A small window: 3000 tokens, 1000 reserved for output, compact at 60% of the 2000 left.
MODEL = Model(id="small", provider="test", context_window=3000, max_output_tokens=1000)
THRESHOLD = 0.6 * 2000


def prompt_for(turn: int) -> str:
    return FACTS[turn % len(FACTS)] if turn % 2 == 0 else f"Status check {turn}: all green."


def echo() -> ScriptedProvider:
    def reply(request: ProviderRequest) -> list[Any]:
        last = request.messages[-1].content if request.messages else ""
        return [TextEvent(f"Noted: {last[:80]}")]

    return ScriptedProvider([reply] * 500)


def settings(**context: Any) -> dict[str, Any]:
    return {
        "observation": {"provider": OFFLINE, "model": "offline", "message_tokens": 120},
        "reflection": {"provider": OFFLINE, "model": "offline", "observation_tokens": 10_000},
        "dropper": {"policy": "lowest-relevance"},
        "context": {
            "recent_messages": 4,
            "observations_pool_max_tokens": 250,
            "observations_pool_target_tokens": 150,
            **context,
        },
    }


def sent_without_prompt(request: ProviderRequest, prompt: str) -> int:
    """Tokens of a request actually sent, less the prompt it was sent for."""
    est = get_estimator()
    return estimate_request_tokens(request, est) - (est.count(prompt) + MESSAGE_OVERHEAD_TOKENS)


async def test_every_request_sent_stays_below_the_ratio_threshold() -> None:
    # passive: no context blocks, so the host replays summary + kept + since; a compaction
    # must bring that whole request, not only the messages since it, under the threshold.
    provider = echo()
    agent = Agent(Session(MemoryStore(), "small"), provider, system=SYSTEM)
    memory = create_observational_memory(
        {**settings(), "passive": True}, trigger={"type": "input_ratio", "ratio": 0.6}
    )
    attached = memory.attach(agent, session_model=MODEL)
    for turn in range(60):
        await attached.agent.run(prompt_for(turn))
        assert await attached.next_request_tokens() < THRESHOLD, f"turn {turn}"
    assert len(attached.compactions) >= 2, "the gate fired on this small window"
    for turn, request in enumerate(provider.requests):
        assert sent_without_prompt(request, prompt_for(turn)) < THRESHOLD, f"turn {turn}"


@pytest.mark.parametrize("passive", [True, False], ids=["history", "blocks"])
async def test_the_estimate_is_the_request_sent_next(passive: bool) -> None:
    seen: list[int] = []

    def gate(context: CompactionContext) -> bool:
        seen.append(context.estimated_input_tokens)
        return context.estimated_input_tokens >= THRESHOLD

    provider = echo()
    agent = Agent(Session(MemoryStore(), f"est-{passive}"), provider, system=SYSTEM)
    memory = create_observational_memory({**settings(), "passive": passive}, should_compact=gate)
    attached = memory.attach(agent, session_model=MODEL)
    after_check: list[int] = []
    compacted: list[bool] = []
    for turn in range(40):
        before = len(attached.compactions)
        await attached.agent.run(prompt_for(turn))
        compacted.append(len(attached.compactions) > before)
        after_check.append(await attached.next_request_tokens())
    assert len(seen) == 40
    for turn in range(1, 40):
        actual = sent_without_prompt(provider.requests[turn], prompt_for(turn))
        # After every gate check (and the compaction it caused) the estimate is the
        # request the next turn sends, its prompt excluded.
        assert abs(after_check[turn - 1] - actual) <= 0.1 * actual, (passive, turn)
        if not compacted[turn - 1]:
            # What the gate itself read is that same figure.
            assert abs(seen[turn - 1] - actual) <= 0.1 * actual, (passive, turn)
            assert seen[turn - 1] < THRESHOLD
    assert passive is False or any(compacted), "the passive session compacted"


async def test_a_compaction_that_cannot_help_is_reported_not_repeated() -> None:
    # With context blocks nothing is replayed: the request is system + memory + recent
    # messages, which a compaction does not shrink. A threshold below that is reported
    # once, and no compaction is appended turn after turn.
    events: list[tuple[str, dict[str, Any]]] = []
    agent = Agent(Session(MemoryStore(), "tiny"), echo(), system=SYSTEM)
    memory = create_observational_memory(
        settings(),
        trigger={"type": "tokens", "tokens": 150},
        debug=lambda e, d: events.append((e, d)),
    )
    attached = memory.attach(agent)
    for turn in range(12):
        await attached.agent.run(prompt_for(turn))
    assert attached.compactions == []
    reports = [d for e, d in events if e == COMPACTION_INSUFFICIENT]
    assert len(reports) == 1 and reports[0]["thresholdTokens"] == 150
    assert reports[0]["estimatedInputTokens"] >= 150


async def test_token_encoding_is_the_one_estimator_everywhere() -> None:
    # "chars/4" counts differently from the default encoding, so every count shows which
    # estimator made it: context blocks, the gate, the strategy and the workers.
    agent = Agent(Session(MemoryStore(), "enc"), echo(), system=SYSTEM)
    seen: list[int] = []

    def gate(context: CompactionContext) -> bool:
        seen.append(context.estimated_input_tokens)
        return False

    memory = create_observational_memory(
        {**settings(), "token_encoding": "chars/4"}, should_compact=gate
    )
    attached = memory.attach(agent)
    for turn in range(6):
        await attached.agent.run(prompt_for(turn))
    estimator = attached.estimator
    assert estimator.name == "chars/4"
    assert attached.runtime._estimator() is estimator
    assert attached.strategy.estimator is estimator
    blocks = await attached.context_provider.blocks(agent.session)
    assert blocks and all(b.tokens == math.ceil(len(b.text) / 4) for b in blocks)
    request = await agent.request_preview(None)
    assert seen[-1] == estimate_request_tokens(request, estimator)
    assert seen[-1] != estimate_request_tokens(request, get_estimator())


async def test_indexed_history_equals_the_branch_history(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        session = Session(store, "hist")
        assert await load_history_since_compaction(session) == []
        first = [await session.append_message("user", f"message {n}") for n in range(6)]
        assert await load_history_since_compaction(session) == await session.entries()
        # A fork, so one kept id lies on another branch and must not be replayed.
        await session.checkout(first[3].id)
        other = await session.append_message("user", "on the fork")
        await session.checkout(first[5].id)
        keep = [first[4].id, other.id, first[5].id]
        await session.append(
            compaction_entry("hist", "summary", {"keepEntryIds": keep}, parent_id=first[5].id)
        )
        await session.append_message("user", "after the compaction")
        expected = history_since_compaction(await session.entries())
        assert await load_history_since_compaction(session) == expected
        assert [e.id for e in expected[1:3]] == [first[4].id, first[5].id]
    finally:
        await store.close()
