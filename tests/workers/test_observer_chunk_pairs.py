"""An observer chunk never separates an assistant's tool call from its results (issue 18
item 4 review): the result alone does not name the tool or its arguments."""

from __future__ import annotations

from typing import Any

from prism_om.entries import SessionEntry, entry_from_wire
from prism_om.tokens import get_estimator
from prism_om.workers.transcript import select_observer_batch


def entry(index: int, message: dict[str, Any]) -> SessionEntry:
    return entry_from_wire(
        {
            "id": f"e{index:02d}",
            "sessionId": "s",
            "parentId": None if index == 0 else f"e{index - 1:02d}",
            "kind": "message",
            "timestamp": "2024-05-01T09:00:00.000Z",
            "message": message,
        }
    )


def call(index: int, *ids: str) -> SessionEntry:
    calls = [{"id": i, "name": "read", "arguments": {"p": 1}} for i in ids]
    return entry(index, {"role": "assistant", "content": "", "toolCalls": calls})


def result(index: int, call_id: str, text: str = "x = 1") -> SessionEntry:
    return entry(index, {"role": "tool", "toolCallId": call_id, "content": text})


def user(index: int, text: str = "please read the file") -> SessionEntry:
    return entry(index, {"role": "user", "content": text})


def tokens(entries: list[SessionEntry]) -> int:
    est = get_estimator()
    return sum(est.count_entry(e) for e in entries)


def test_a_token_break_between_call_and_result_moves_the_call_to_the_next_chunk() -> None:
    entries = [user(0), call(1, "c1"), result(2, "c1"), user(3)]
    cap = tokens(entries[:2])  # the break would fall between the call and its result
    batch = select_observer_batch(entries, 1_000_000, max_tokens=cap)
    assert [e.id for e in batch.sources] == ["e00"]
    rest = select_observer_batch(entries[1:], 1_000_000, max_tokens=cap)
    assert [e.id for e in rest.sources][:2] == ["e01", "e02"]


def test_a_call_with_several_results_keeps_them_all() -> None:
    entries = [user(0), call(1, "a", "b"), result(2, "a"), result(3, "b"), user(4)]
    cap = tokens(entries[:3])  # room for the call and one result
    batch = select_observer_batch(entries, 1_000_000, max_tokens=cap)
    assert [e.id for e in batch.sources] == ["e00"]


def test_a_pair_larger_than_the_token_cap_goes_alone() -> None:
    entries = [call(0, "c1"), result(1, "c1", "y = 2 " * 50), user(2)]
    batch = select_observer_batch(entries, 1_000_000, max_tokens=tokens(entries[:1]))
    assert [e.id for e in batch.sources] == ["e00", "e01"]


def test_the_byte_cap_still_applies_to_a_pair() -> None:
    entries = [user(0), call(1, "c1"), result(2, "c1", "z" * 4000)]
    batch = select_observer_batch(entries, 2000)
    assert [e.id for e in batch.sources] == ["e00"]  # the call waits for its result
    alone = select_observer_batch(entries[1:], 2000)
    # The pair opens the chunk: the call is shown, the result does not fit the bytes.
    assert [e.id for e in alone.sources] == ["e01"]


def test_bookkeeping_between_call_and_result_moves_with_them() -> None:
    marker = entry_from_wire(
        {
            "id": "m",
            "sessionId": "s",
            "parentId": "e01",
            "kind": "custom",
            "timestamp": "2024-05-01T09:00:00.000Z",
            "data": {"type": "host.note"},
        }
    )
    entries = [user(0), call(1, "c1"), marker, result(3, "c1")]
    batch = select_observer_batch(entries, 1_000_000, max_tokens=tokens(entries[:2]))
    assert [e.id for e in batch.scanned] == ["e00"]
