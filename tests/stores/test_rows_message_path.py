"""Entry rows of message entries read in one Python call per row (issue 16): the same
entries as before, and a body that is not JSON text still named."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from prism_om.entries import SessionEntry, custom_entry, message_entry
from prism_om.errors import CorruptStoreError
from prism_om.stores import _rows
from prism_om.stores._rows import entries_from_rows, payload_json


def _messages(count: int) -> list[SessionEntry]:
    made: list[SessionEntry] = []
    parent = None
    for n in range(count):
        role = "user" if n % 2 else "assistant"
        made.append(message_entry("s", role, f"text {n} ü", parent_id=parent, entry_id=f"m{n}"))
        parent = made[-1].id
    return made


def _row(entry: SessionEntry, body: Any = None) -> tuple[Any, ...]:
    stored = payload_json(entry).encode() if body is None else body
    return (entry.id, entry.session_id, entry.parent_id, entry.kind, entry.timestamp, stored)


@pytest.fixture
def calls_into_rows() -> Iterator[list[str]]:
    """Names of the Python functions of ``stores/_rows.py`` called meanwhile."""
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename == _rows.__file__:
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(None)


def test_message_rows_cost_one_python_call_each(calls_into_rows: list[str]) -> None:
    entries = _messages(300)
    rows = [_row(e) for e in entries]
    entries_from_rows(rows[:1])  # the validator is built once, then cached
    calls_into_rows.clear()
    built = entries_from_rows(rows)
    sys.setprofile(None)
    # Before: three per row (check the body, build the entry, the all() test): 906.
    assert len(calls_into_rows) <= len(rows) + 10, sorted(set(calls_into_rows))
    assert built == entries
    assert [e.model_fields_set for e in built] == [e.model_fields_set for e in entries]
    assert [e.to_json() for e in built] == [e.to_json() for e in entries]


def test_mixed_rows_and_text_bodies_read_as_before() -> None:
    entries = _messages(6)
    entries.insert(3, custom_entry("s", {"type": "app.note"}, parent_id="m2", entry_id="c"))
    for text_at in (None, 0, 4):
        rows = [_row(e, payload_json(e) if i == text_at else None) for i, e in enumerate(entries)]
        built = entries_from_rows(rows)
        assert built == entries
        assert [e.model_fields_set for e in built] == [e.model_fields_set for e in entries]


@pytest.mark.parametrize("body", [None, 7, 1.5])
def test_a_message_body_that_is_not_text_is_named(body: object) -> None:
    entries = _messages(5)
    rows = [_row(e) for e in entries]
    rows[3] = (*rows[3][:5], body)
    with pytest.raises(CorruptStoreError, match="not JSON text") as caught:
        entries_from_rows(rows)
    assert caught.value.entry_id == "m3"
