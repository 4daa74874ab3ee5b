"""A message entry's ``data`` (schema version 7): what it may hold, checked where every
entry is built (``entry_from_wire``), so no adapter stores what another would refuse.

A memory record's ``om.*`` marker is refused on a message: every reader of a marker
(the folds, the live pool, recall) would otherwise take the message for a record.
"""

from __future__ import annotations

import pytest

from prism_om.core.records import OBSERVATIONS_RECORDED
from prism_om.entries import SessionEntry, entry_from_wire, message_entry
from prism_om.errors import InvalidEntryError
from prism_om.stores.memory import MemoryStore


def _wire(data: object) -> dict[str, object]:
    return {
        "id": "e1",
        "sessionId": "s",
        "parentId": None,
        "kind": "message",
        "timestamp": "2026-03-02T09:00:00.000Z",
        "message": {"role": "user", "content": "hello"},
        "data": data,
    }


def test_a_message_may_carry_a_hosts_marked_data() -> None:
    entry = entry_from_wire(_wire({"type": "host.item", "item": {"id": 3}}))
    assert entry.custom_type == "host.item"
    assert entry.to_wire()["data"] == {"type": "host.item", "item": {"id": 3}}
    assert SessionEntry.model_validate_json(entry.to_json()) == entry


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"item": 1}, "string 'type' marker"),
        ({"type": ""}, "string 'type' marker"),
        ({"type": 7}, "string 'type' marker"),
        ({"type": OBSERVATIONS_RECORDED, "observations": []}, "reserved"),
        ({"type": "om.anything"}, "reserved"),
    ],
)
def test_unmarked_or_memory_marked_data_on_a_message_is_refused(data: object, words: str) -> None:
    with pytest.raises(InvalidEntryError, match=words):
        entry_from_wire(_wire(data))
    with pytest.raises(InvalidEntryError, match=words):
        message_entry("s", "user", "hello", data=data)  # type: ignore[arg-type]


async def test_a_store_never_folds_a_message_as_a_memory_record() -> None:
    store = MemoryStore()
    first = message_entry("s", "user", "hello", data={"type": "host.item", "n": 1})
    await store.append(first)
    assert (await store.ledger("s")).observations == ()
    assert await store.entries("s") == [first]
