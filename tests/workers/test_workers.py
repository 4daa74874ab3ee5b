"""Observer, reflector and dropper: inputs, validation against what was shown, splitting."""

from __future__ import annotations

import json
from typing import Any

from prism_om.core.records import Observation
from prism_om.entries import custom_entry, message_entry
from prism_om.providers import ScriptedProvider
from prism_om.workers import (
    RECORD_OBSERVATIONS,
    RECORD_REFLECTIONS,
    lowest_relevance_drop,
    parse_transcript,
    run_dropper,
    run_observer,
    run_reflector,
)


def entries() -> list[Any]:
    return [
        message_entry(
            "s", "user", "Launch is 2024-06-14", entry_id="m1", timestamp="2024-05-01T09:00:00Z"
        ),
        custom_entry("s", {"type": "host.note"}, entry_id="c1", timestamp="2024-05-01T09:01:00Z"),
        message_entry("s", "assistant", "Noted", entry_id="m2", timestamp="2024-05-01T09:02:00Z"),
    ]


def obs_call(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"tool_call": {"name": RECORD_OBSERVATIONS, "arguments": {"observations": items}}}


async def test_observer_defaults_observed_at_and_rejects_unshown_sources() -> None:
    p = ScriptedProvider(
        [
            [
                obs_call([{"text": "bad", "sourceEntryIds": ["c1"]}]),
                obs_call([{"text": "Launch on 14 June", "sourceEntryIds": ["m1", "m2"]}]),
            ],
            [],
        ]
    )
    result = await run_observer(provider=p, entries=entries(), max_turns=3)
    assert [o.text for o in result.observations] == ["Launch on 14 June"]
    assert result.observations[0].observed_at == "2024-05-01T09:02:00Z"
    assert result.covers_up_to_id == "m2" and result.source_ids == ("m1", "m2")
    error = json.loads(p.requests[1].messages[2].content)
    assert error["ok"] is False and "c1" in error["error"]
    # bookkeeping never enters the prompt
    assert [e.id for e in parse_transcript(p.requests[0].messages[0].content)] == ["m1", "m2"]
    record = result.record()
    assert record["type"] == "om.observations.recorded" and record["coversUpToId"] == "m2"


async def test_observer_with_zero_observations_still_covers() -> None:
    result = await run_observer(provider=ScriptedProvider([[]]), entries=entries(), max_turns=1)
    assert result.observations == () and result.record()["coversUpToId"] == "m2"


async def test_observer_splits_input_and_truncates_one_oversized_message() -> None:
    big = [
        message_entry("s", "user", "x" * 3000, entry_id=f"m{i}", timestamp="2024-05-01T09:00:00Z")
        for i in range(3)
    ]
    p = ScriptedProvider([[]] * 5)
    first = await run_observer(provider=p, entries=big, max_turns=1, max_message_bytes=9000)
    assert first.covers_up_to_id == "m0" and first.remaining == 2
    assert first.truncated_ids == ("m0",)
    assert "truncated" in p.requests[0].messages[0].content
    second = await run_observer(provider=p, entries=big[1:], max_turns=1, max_message_bytes=9000)
    assert second.covers_up_to_id == "m1"


def obs(i: int, priority: str = "medium", day: int = 1) -> Observation:
    return Observation(
        id=f"{i:012x}",
        text=f"fact number {i} " * 5,
        source_entry_ids=["m1"],
        observed_at=f"2024-05-{day:02d}T09:00:00Z",
        priority=priority,  # type: ignore[arg-type]
    )


async def test_reflector_only_cites_shown_observations_and_chunks() -> None:
    pool = [obs(i) for i in range(60)]

    def reply(request: Any) -> list[dict[str, Any]]:
        if len(request.messages) > 1:
            return []
        return [
            {
                "tool_call": {
                    "name": RECORD_REFLECTIONS,
                    "arguments": {
                        "reflections": [{"text": "all", "observationIds": [f"{0:012x}"]}]
                    },
                }
            }
        ]

    p = ScriptedProvider([reply] * 40, then="stop")
    result = await run_reflector(
        provider=p, observations=pool, max_turns=2, covers_up_to_id="m1", max_message_bytes=4096
    )
    assert len(result.runs) > 1
    # Only the first chunk showed observation 0; later chunks' calls were refused.
    assert len(result.reflections) == 1
    assert result.record()["coversUpToId"] == "m1"


def test_lowest_relevance_drop_orders_by_priority_then_age() -> None:
    pool = [obs(1, "high", 1), obs(2, "low", 3), obs(3, "medium", 1), obs(4, "low", 2)]
    dropped = lowest_relevance_drop(pool, target_tokens=0)
    assert dropped == [obs(4).id, obs(2).id, obs(3).id, obs(1).id]
    assert lowest_relevance_drop(pool, target_tokens=10**6) == []


async def test_model_dropper_drops_only_shown_ids() -> None:
    pool = [obs(1), obs(2)]
    p = ScriptedProvider(
        [
            [
                {
                    "tool_call": {
                        "name": "drop_observations",
                        "arguments": {"ids": ["ffffffffffff"]},
                    }
                },
                {"tool_call": {"name": "drop_observations", "arguments": {"ids": [obs(2).id]}}},
            ],
            [],
        ]
    )
    result = await run_dropper(provider=p, observations=pool, target_tokens=1, max_turns=2)
    assert result.observation_ids == (obs(2).id,)
