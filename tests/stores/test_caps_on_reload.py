"""The caps are append rules: what a store already holds stays readable (issue 13, 14-15)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import prism_om.stores.base as base
from prism_om import MAX_ENTRY_BYTES, MAX_SOURCES_PER_OBSERVATION
from prism_om.entries import custom_entry
from prism_om.errors import EntryTooLargeError, MemoryRecordTooLargeError
from prism_om.observational_memory import recall_observational_memory
from prism_om.testing.conformance import StoreOpener
from prism_om.testing.generate import make_message

TS = "2024-05-01T10:00:00Z"


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_records_and_entries_stored_before_the_caps_still_load(
    kind: str,
    make_opener: Callable[[str], StoreOpener],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    (tmp_path / kind).mkdir()  # make_opener roots each adapter's store here
    opener = make_opener(kind)
    count = MAX_SOURCES_PER_OBSERVATION + 4
    chain = [
        make_message("s1", f"m{i}", f"m{i - 1}" if i else None, "user", "x", i)
        for i in range(count)
    ]
    wide = {
        "type": "om.observations.recorded",
        "observations": [
            {
                "id": "aaaaaaaaaaaa",
                "text": "wide",
                "sourceEntryIds": [e.id for e in chain],
                "observedAt": TS,
            }
        ],
    }
    record = custom_entry("s1", wide, parent_id=chain[-1].id, entry_id="wide", timestamp=TS)
    big = make_message("s1", "big", "wide", "user", "y" * MAX_ENTRY_BYTES, count)

    store = await opener.open()
    with pytest.raises(MemoryRecordTooLargeError):
        await store.append_many([*chain, record])
    oversized = make_message("s1", "big0", "m0", "user", "y" * MAX_ENTRY_BYTES, 1)
    with pytest.raises(EntryTooLargeError):
        await store.append_many([chain[0], oversized])
    assert await store.list("s1") == []
    # What an older version (without the caps) wrote:
    no_check: Callable[..., Any] = lambda *args: None  # noqa: E731
    monkeypatch.setattr(base, "check_memory_record_caps", no_check)
    monkeypatch.setattr(base, "check_entry_size", no_check)
    await store.append_many([*chain, record, big])
    await store.close()
    monkeypatch.undo()

    reopened = await opener.open()
    try:
        assert len(await reopened.list("s1")) == count + 2
        assert await reopened.leaf("s1") == "big"
        found = await recall_observational_memory(reopened, "aaaaaaaaaaaa", session_id="s1")
        assert found.found and found.sources_total == count and len(found.sources) == 100
        # New appends still follow the caps.
        again = custom_entry("s1", wide, parent_id="big", entry_id="again", timestamp=TS)
        with pytest.raises(MemoryRecordTooLargeError):
            await reopened.append(again)
    finally:
        await reopened.close()
