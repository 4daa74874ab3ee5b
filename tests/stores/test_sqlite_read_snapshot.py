"""A read of several statements on SQLite's reader sees one snapshot of the file.

A page of 64 or more messages runs on the reader's thread, as two statements when the
cursor's branch piece runs out (the page's start, then the next piece's rows). A commit
landing between them must not show in the page: here another connection deletes the next
piece's rows from inside the trace callback of the second statement (deterministically
between the two), and the page still equals the page read before the deletion.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prism_om.entries import message_entry
from prism_om.stores.sqlite import SqliteStore


async def test_a_page_on_the_reader_is_one_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    armed: list[int] = []  # the segment to delete, once the page's read is running
    fired: list[str] = []
    statements_seen = [0]

    def trace(sql: str) -> None:
        if not armed or sql in ("BEGIN", "COMMIT") or sql.startswith("PRAGMA"):
            return
        statements_seen[0] += 1
        if statements_seen[0] == 2:
            segment = armed.pop()
            other = sqlite3.connect(path, isolation_level=None)
            try:
                other.execute("DELETE FROM entries WHERE segment_id = ?", (segment,))
            finally:
                other.close()
            fired.append(sql)

    opened = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = opened(*args, **kwargs)
        conn.set_trace_callback(trace)
        return conn

    async with await SqliteStore.open(path) as store:
        trunk = []
        parent_id = None
        for i in range(12):
            entry = message_entry("s", "user", f"trunk {i}", parent_id=parent_id)
            trunk.append(entry)
            parent_id = entry.id
        await store.append_many(trunk)
        await store.checkout("s", trunk[9].id)
        fork = []
        parent_id = trunk[9].id
        for i in range(100):
            entry = message_entry("s", "assistant", f"fork {i}", parent_id=parent_id)
            fork.append(entry)
            parent_id = entry.id
        await store.append_many(fork)
        want = await store.page_messages("s", trunk[2].id, 70, "forward")
        assert [e.id for e in want[0]] == [e.id for e in [*trunk[3:10], *fork[:63]]]
    with sqlite3.connect(path) as conn:
        ((segment,),) = conn.execute(
            "SELECT segment_id FROM entries WHERE id = ?", (fork[0].id,)
        ).fetchall()
    conn.close()

    monkeypatch.setattr(sqlite3, "connect", connect)
    async with await SqliteStore.open(path) as store:
        assert await store.leaf("s") == fork[-1].id  # opened; the reader starts on the page
        armed.append(segment)
        got = await store.page_messages("s", trunk[2].id, 70, "forward")
        assert fired, "the page ran as one statement: this test needs a read of two"
        assert got == want
