"""Bounded reflections (issue 18 item 3): the reflection budget, the consolidating pass,
and the rendered memory held under ``context.observations_pool_max_tokens``."""

from __future__ import annotations

import re
from typing import Any

import pytest

from prism_om.attach import create_observational_memory
from prism_om.core.limits import resolve_memory_worker_limits
from prism_om.core.memory_budget import drop_to_rendered_target, rendered_memory_tokens
from prism_om.core.records import Observation, Reflection
from prism_om.errors import InvalidInputError
from prism_om.host import Agent
from prism_om.observational_memory import recall_observational_memory
from prism_om.observational_memory.settings import resolve_observational_memory_settings
from prism_om.providers import ProviderRequest, ScriptedProvider, TextEvent
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.testing.conformance import StoreOpener
from prism_om.tokens import get_estimator
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime
from prism_om.workers._common import WorkerCall
from prism_om.workers.consolidator import (
    CONSOLIDATE_REFLECTIONS,
    ConsolidationRecorder,
    consolidate_reflections,
    merge_reflections,
    reflection_tokens,
)
from prism_om.workers.loop import ToolInputError

POOL_MAX_TOKENS = 700
TURNS = 1000
BLOCK = re.compile(r"<observational-memory>\n(.*?)\n</observational-memory>", re.S)
PEOPLE = ("Dana", "Sam", "Priya", "Jonas", "Mei", "Omar")
THINGS = ("billing", "search", "checkout", "ledger", "gateway", "reports")


def turn_text(turn: int) -> str:
    """A scripted user turn: a fact with names, numbers and dates most of the time."""
    who, what = PEOPLE[turn % len(PEOPLE)], THINGS[(turn // 3) % len(THINGS)]
    if turn % 5 == 4:
        return f"Thanks, got it ({turn})."
    return (
        f"{who} decided the {what} release {turn // 7}.{turn % 7} ships on "
        f"2026-{1 + turn % 12:02d}-{1 + turn % 28:02d} with budget {100 + turn} EUR."
    )


def recording_echo(seen: list[int]) -> ScriptedProvider:
    """The agent's model: records the memory block's size at every context build."""
    estimator = get_estimator()

    def reply(request: ProviderRequest) -> list[Any]:
        match = BLOCK.search(request.system)
        seen.append(estimator.count(match.group(1)) if match else 0)
        return [TextEvent("Noted.")]

    return ScriptedProvider([reply] * (TURNS + 10))


def bounded_memory() -> Any:
    offline = OfflineMemoryProvider()
    return create_observational_memory(
        {
            "observation": {"provider": offline, "model": "offline", "message_tokens": 120},
            "reflection": {"provider": offline, "model": "offline", "observation_tokens": 300},
            "dropper": {"policy": "lowest-relevance"},
            "context": {
                "compact_after_tokens": 10**9,
                "recent_messages": 4,
                "observations_pool_max_tokens": POOL_MAX_TOKENS,
                "observations_pool_target_tokens": 450,
            },
        }
    )


async def test_rendered_memory_stays_under_the_pool_cap_over_a_long_session(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        session = Session(store, "long")
        seen: list[int] = []
        agent = Agent(session, recording_echo(seen), system="You are a release assistant.")
        attached = bounded_memory().attach(agent)
        for turn in range(TURNS):
            await attached.agent.run(turn_text(turn))
        assert len(seen) == TURNS
        assert max(seen) <= POOL_MAX_TOKENS, f"memory over its cap at turn {seen.index(max(seen))}"
        assert max(seen) > POOL_MAX_TOKENS // 2, "the session grew enough memory to test the cap"
        ledger = await store.ledger("long")
        # Reflections were consolidated, again and again, and the active ones fit the budget.
        assert len(ledger.supersessions) > 10
        live = await store.live_ledger("long")
        budget = POOL_MAX_TOKENS // 4
        assert reflection_tokens([r.reflection for r in live.reflections]) <= budget
        # The first reflection left the active view long ago; it is still recalled by id.
        first = ledger.reflections[0].id
        assert first not in {r.id for r in live.reflections}
        recalled = await recall_observational_memory(store, first, session_id="long")
        assert recalled.found and recalled.to_json()["supersededBy"] is not None
    finally:
        await store.close()


def test_the_budget_defaults_to_a_quarter_of_the_pool_cap() -> None:
    assert resolve_observational_memory_settings().reflection.budget_tokens == 5000
    settings = resolve_observational_memory_settings(context={"observationsPoolMaxTokens": 800})
    assert settings.reflection.budget_tokens == 200
    explicit = resolve_observational_memory_settings(
        {"reflection": {"budgetTokens": 64}}, context={"observations_pool_max_tokens": 800}
    )
    assert explicit.reflection.budget_tokens == 64
    with pytest.raises(InvalidInputError, match=r"reflection\.budget_tokens"):
        resolve_observational_memory_settings(reflection={"budget_tokens": 0})


def reflections(n: int, words: int = 30) -> list[Reflection]:
    return [
        Reflection(
            id=f"{i + 1:012x}",
            text=f"Reflection {i}: " + " ".join(f"fact{i}-{w}" for w in range(words)),
            observation_ids=[f"{0xA00 + i:012x}"],
            priority="high" if i == 1 else "low",
        )
        for i in range(n)
    ]


async def test_within_the_budget_nothing_is_consolidated() -> None:
    active = reflections(3)
    result = await consolidate_reflections(
        active, budget_tokens=reflection_tokens(active), taken_ids=set()
    )
    assert result.reflections == ()


async def test_the_deterministic_merge_supersedes_the_oldest_down_to_half() -> None:
    active = reflections(10)
    budget = reflection_tokens(active) // 2
    taken: set[str] = set()
    result = await consolidate_reflections(active, budget_tokens=budget, taken_ids=taken)
    assert len(result.reflections) == 1
    merged = result.reflections[0]
    gone = merged.supersedes_reflection_ids or []
    assert gone == [r.id for r in active[: len(gone)]], "oldest first, in order"
    left = [r for r in active if r.id not in gone]
    assert reflection_tokens([*left, merged]) <= budget // 2
    assert get_estimator().count(merged.text) <= budget // 4
    assert merged.priority == "high" and merged.id in taken
    assert merged.observation_ids == [o for r in active if r.id in gone for o in r.observation_ids]


def test_a_merge_keeps_a_share_of_every_reflection_within_its_cap() -> None:
    active = reflections(6, words=80)
    merged = merge_reflections(active, cap_tokens=120, new_id="0123456789ab")
    assert get_estimator().count(merged.text) <= 120
    assert all(f"Reflection {i}:" in merged.text for i in range(6))


def consolidating_model(ids: list[str]) -> ScriptedProvider:
    return ScriptedProvider(
        [
            [
                {
                    "tool_call": {
                        "name": CONSOLIDATE_REFLECTIONS,
                        "arguments": {
                            "reflections": [
                                {"text": "Early facts, merged.", "supersedesReflectionIds": ids}
                            ]
                        },
                    }
                }
            ]
        ],
        then="stop",
    )


def call(provider: Any) -> WorkerCall:
    return WorkerCall(provider=provider, limits=resolve_memory_worker_limits(max_worker_turns=2))


async def test_the_model_consolidates_and_the_merge_tops_up() -> None:
    active = reflections(10)
    budget = reflection_tokens(active) // 2
    # The model merges only the first two: not enough, so the merge takes the next ones.
    provider = consolidating_model([active[0].id, active[1].id])
    result = await consolidate_reflections(
        active, budget_tokens=budget, taken_ids=set(), call=call(provider)
    )
    assert result.run is not None and result.merged_deterministically > 0
    by_model, merged = result.reflections
    assert by_model.text == "Early facts, merged."
    assert by_model.supersedes_reflection_ids == [active[0].id, active[1].id]
    assert set(merged.supersedes_reflection_ids or ()).isdisjoint(
        by_model.supersedes_reflection_ids or ()
    )
    gone = set(result.superseded_ids)
    left = [r for r in active if r.id not in gone]
    assert reflection_tokens([*left, *result.reflections]) <= budget
    assert "<reflections>" in provider.requests[0].messages[0].content


def test_the_model_may_name_only_reflections_shown_each_once() -> None:
    shown = reflections(3)
    recorder = ConsolidationRecorder(shown, taken_ids=set())
    with pytest.raises(ToolInputError, match="not one of the reflections shown"):
        recorder.handle(
            {"reflections": [{"text": "x", "supersedesReflectionIds": ["ffffffffffff"]}]}
        )
    recorder.handle({"reflections": [{"text": "x", "supersedesReflectionIds": [shown[0].id]}]})
    with pytest.raises(ToolInputError, match="already replaced"):
        recorder.handle({"reflections": [{"text": "y", "supersedesReflectionIds": [shown[0].id]}]})
    assert [r.supersedes_reflection_ids for r in recorder.reflections] == [[shown[0].id]]


def observation(i: int, words: int = 6) -> Observation:
    return Observation(
        id=f"{0xB00 + i:012x}",
        text=" ".join(f"w{i}x{w}" for w in range(words)),
        source_entry_ids=[f"m{i}"],
        observed_at=f"2026-03-{1 + i % 28:02d}T10:{i % 60:02d}:00Z",
        priority="low" if i % 3 else "high",
    )


def test_drops_follow_the_rendered_memory_not_the_bare_text() -> None:
    pool = [observation(i) for i in range(40)]
    kept_reflections = reflections(2)
    target = rendered_memory_tokens(kept_reflections, pool) // 3
    dropped = drop_to_rendered_target(kept_reflections, pool, target)
    kept = [o for o in pool if o.id not in set(dropped)]
    assert rendered_memory_tokens(kept_reflections, kept) <= target
    # One drop fewer would not fit: the fewest drops, least relevant first.
    back = [o for o in pool if o.id not in set(dropped[:-1])]
    assert rendered_memory_tokens(kept_reflections, back) > target
    assert all(o.priority == "low" for o in pool if o.id in set(dropped[:5]))


async def test_the_dropper_holds_the_rendered_memory_under_the_cap() -> None:
    # The observations' bare text is within the cap; their rendered lines are not.
    session = Session(MemoryStore(), "r")
    for i in range(30):
        await session.append_message("user", f"note {i}")
    scripted = ScriptedProvider(
        [
            [
                {
                    "tool_call": {
                        "name": "record_observations",
                        "arguments": {
                            "observations": [
                                {"text": f"n{i}", "sourceEntryIds": [e.id]}
                                for i, e in enumerate(await session.entries())
                            ]
                        },
                    }
                }
            ]
        ],
        then="stop",
    )
    runtime = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": scripted},
        dropper={"policy": "lowest-relevance"},
        settings={
            "context": {"observations_pool_max_tokens": 200, "observations_pool_target_tokens": 150}
        },
        session_model="offline",
    )
    result = await runtime.flush(force=True)
    recorded = [r.observation for r in (await session.store.ledger("r")).observations]
    assert len(recorded) == 30
    assert sum(get_estimator().count(o.text) for o in recorded) < 200
    assert result.outcome("dropper").status == "ran"  # type: ignore[union-attr]
    pool = [r.observation for r in (await session.store.live_ledger("r")).observations]
    assert 0 < len(pool) < 30
    assert rendered_memory_tokens([], pool) <= 150


async def session_over_budget(sid: str) -> Session:
    """A session whose six reflections (about 40 tokens each) exceed a 60-token budget."""
    session = Session(MemoryStore(), sid)
    message = await session.append_message("user", "Dana ships billing 2.4 on 2026-05-02.")
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                {"id": "0b0b0b0b0b0b", "text": "Billing 2.4 ships.", "sourceEntryIds": [message.id]}
            ],
        }
    )
    await session.append_custom(
        {
            "type": "om.reflections.recorded",
            "reflections": [
                {**r.model_dump(by_alias=True, mode="json"), "observationIds": ["0b0b0b0b0b0b"]}
                for r in reflections(6)
            ],
        }
    )
    return session


def over_budget_runtime(session: Session, reflector: Any) -> Any:
    return create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        reflection={"provider": reflector, "budget_tokens": 60, "observation_tokens": 10**6},
        session_model="offline",
    )


async def test_the_consolidator_merges_past_the_budget_then_skips_within_it() -> None:
    session = await session_over_budget("c1")
    # A reflector whose call fails: the deterministic merge keeps the budget anyway.
    runtime = over_budget_runtime(session, ScriptedProvider([], then="error"))
    result = await runtime.flush()
    outcome = result.outcome("consolidator")
    assert outcome is not None and outcome.status == "ran" and outcome.error
    assert outcome.memory_ids and set(outcome.memory_ids) <= set(result.reflection_ids)
    live = await session.store.live_ledger("c1")
    assert reflection_tokens([r.reflection for r in live.reflections]) <= 60
    ledger = await session.store.ledger("c1")
    assert len(ledger.reflections) == 7 and ledger.reflection_coverage is None
    again = await runtime.flush()
    assert again.outcome("consolidator").reason == "within_budget"  # type: ignore[union-attr]


async def test_the_consolidator_leaves_host_scopes_alone() -> None:
    session = await session_over_budget("c2")
    await session.append_custom({"type": "om.scope.opened", "id": "task:a"})
    runtime = over_budget_runtime(session, ScriptedProvider([], then="error"))
    result = await runtime.flush()
    assert result.outcome("consolidator").reason == "host_scopes"  # type: ignore[union-attr]
    assert (await session.store.ledger("c2")).supersessions == ()
