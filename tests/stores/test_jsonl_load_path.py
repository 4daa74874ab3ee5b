"""Loading a JSONL session: the per-line fast path keeps every rule of the slow one.

A message line under a known parent is added with a few lookups (no batch check, no
pending view); blank lines still count in line numbers, and every other line still takes
the full check, so damage is reported exactly as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prism_om.core.timestamps import utc_timestamp
from prism_om.entries import custom_entry, message_entry
from prism_om.errors import CorruptStoreError
from prism_om.stores.jsonl import JsonlStore
from prism_om.stores.segment_index import index as _tree
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import random_builder


def _line(entry_id: str, parent: str | None, session: str = "s") -> bytes:
    entry = message_entry(session, "user", entry_id, parent_id=parent, entry_id=entry_id)
    return entry.to_json().encode()


async def test_message_lines_load_without_a_pending_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [_line("m0", None)] + [_line(f"m{i}", f"m{i - 1}") for i in range(1, 200)]
    (tmp_path / "s.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    built: list[object] = []

    class Counting(_tree._PendingView):
        def __init__(self, *args: object) -> None:
            built.append(args)
            super().__init__(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_tree, "_PendingView", Counting)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert len(await store.entries("s")) == 200
        assert await store.leaves("s") == ["m199"]
    assert built == []


async def test_memory_records_still_take_the_full_check_on_load(tmp_path: Path) -> None:
    builder = random_builder(5, steps=80, session_id="om")
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await load_builder(store, builder)
        expected = await store.ledger("om")
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert await store.ledger("om") == expected
    # A record whose source is not on its branch is refused on load, with its line.
    path = tmp_path / "bad.jsonl"
    record = custom_entry(
        "bad",
        {
            "type": "om.observations.recorded",
            "observations": [
                {
                    "id": "abcdefabcdef",
                    "text": "x",
                    "sourceEntryIds": ["nowhere"],
                    "observedAt": "2026-01-05T09:00:00Z",
                }
            ],
        },
        parent_id="b1",
        entry_id="b2",
    )
    lines = [
        _line("b0", None, "bad"),
        b"   ",
        _line("b1", "b0", "bad"),
        record.to_json().encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    async with await JsonlStore.open(tmp_path) as store:
        with pytest.raises(CorruptStoreError, match=r"bad\.jsonl line 4"):
            await store.list("bad")


async def test_blank_lines_count_in_the_line_numbers_of_later_damage(tmp_path: Path) -> None:
    lines = [_line("a", None), b"", b" \t", _line("b", "a"), _line("c", "ghost")]
    (tmp_path / "s.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    async with await JsonlStore.open(tmp_path) as store:
        with pytest.raises(CorruptStoreError, match=r"s\.jsonl line 5: .*ghost"):
            await store.list("s")


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-01-05T09:00:00Z",
        "2026-01-05T09:00:00.123Z",
        "2026-01-05T09:00:00+02:00",
        "2026-01-05T09:00:00",
        "2026-01-05 09:00:00Z",
        "20260105T090000Z",
    ],
)
def test_comparable_time_equals_utc_timestamp(stamp: str) -> None:
    assert _tree.comparable_time(stamp) == utc_timestamp(stamp)
