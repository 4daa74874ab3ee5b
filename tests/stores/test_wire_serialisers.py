"""``stores._wire``: the Rust-only wire dicts equal the models' own, key order included."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings

from prism_om.core.ledger import fold_ledger
from prism_om.core.records import Observation, ObservationPayload, dated_observation
from prism_om.entries import entry_from_wire
from prism_om.stores._wire import entry_wire, observation_wire
from prism_om.testing.om_factories import BranchBuilder, branch_builders


def same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got == want
    assert json.dumps(got) == json.dumps(want)  # the same keys in the same order


def wire(message: dict[str, Any], parent: str | None = "p") -> dict[str, Any]:
    return {
        "id": "e1",
        "sessionId": "s1",
        "parentId": parent,
        "kind": "message",
        "timestamp": "2026-01-05T09:00:00Z",
        "message": message,
    }


def test_message_entries_of_every_shape() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": ""},
        {"role": "tool", "content": "out", "toolCallId": "c1", "name": "ls"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "url": "https://x/y.png"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "thinking", "thinking": "hm"},
            ],
            "toolCalls": [
                {"id": "c1", "name": "ls", "arguments": {"a": None, "b": [None, {"c": None}]}},
                {"id": "c2", "name": "pwd"},
            ],
        },
    ]
    for message in messages:
        for parent in ("p", None):
            entry = entry_from_wire(wire(message, parent))
            same(entry_wire(entry), entry.to_wire())


def test_other_kinds_take_their_own_path() -> None:
    b = BranchBuilder(session_id="s1")
    b.message("user", "x")
    rec = b.observe(1)
    same(entry_wire(rec), rec.to_wire())


def test_observations_of_every_shape() -> None:
    full = {
        "id": "0123456789ab",
        "text": "t",
        "sourceEntryIds": ["e1", "e2"],
        "observedAt": "2026-01-05T09:00:00Z",
        "referencedDate": "2026-01-06",
        "priority": "high",
        "trust": "user",
        "metadata": {"a": None, "b": [None, {"c": None}]},
    }
    minimal = {"id": "0123456789ab", "text": "t", "sourceEntryIds": ["e1"]}
    for shape in (full, {**minimal, "observedAt": "2026-01-05T09:00:00Z"}):
        observation = Observation.model_validate(shape)
        same(observation_wire(observation), observation.model_dump(by_alias=True, mode="json"))
    # Dated by the fold (model_construct), as a TypeScript record is.
    dated = dated_observation(ObservationPayload.model_validate(minimal), lambda _: None, "T")
    same(observation_wire(dated), dated.model_dump(by_alias=True, mode="json"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(builder=branch_builders(min_steps=1, max_steps=30))
def test_generated_sessions(builder: BranchBuilder) -> None:
    for entry in builder.entries:
        same(entry_wire(entry), entry.to_wire())
    for recorded in fold_ledger(builder.path).observations:
        observation = recorded.observation
        same(observation_wire(observation), observation.model_dump(by_alias=True, mode="json"))
