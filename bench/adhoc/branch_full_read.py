"""Issue 16 figures: the SQLite ``branch()`` of a whole branch, old read beside new.

Usage: python bench/adhoc/branch_full_read.py [--entries N] [--rounds R] [--keep DIR]

On one store of the benchmark transcript (N entries, default 10,000; the dataset stays
alive in the process, as in ``python -m bench``, so the heap a collection walks is the
bench's), side by side in one process, each way run once per round in turn so machine
load hits them alike; the median of R rounds (default 9) of wall and CPU time, and of
the cyclic collections run during one call and the time they took (the profile of where
the growth with size goes):

- ``old``: the read before this change (depth first, rows sliced, slots by depth, the
  collector running during the fetch, ``entries_from_rows`` with three calls per row);
- ``new``: ``store.entries()`` as it is now (collector paused over fetch and parse, rows
  sorted by their last column and handed to the parser as they are);
- ``wire``: the rejected lever, one value per row (SQLite builds each row's whole wire
  JSON with ``json_quote`` and ``||``), joined and validated in one pydantic-core call
  into ``SessionEntry`` models (the schema less its Python after-validators);
- ``floor``: ``SELECT`` + ``json.loads`` of the payload rows (``bench/floor.py``), and
  ``floor wire``: the floor of the one-value row shape (the wire text + ``json.loads``).

The machine is shared: compare the columns of one run, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pydantic_core import SchemaValidator, core_schema

from bench.data import SESSION_ID, build_dataset
from prism_om._gc import collector_paused
from prism_om.entries import SessionEntry
from prism_om.errors import CorruptStoreError
from prism_om.stores import open_store
from prism_om.stores._rows import (
    _entry,
    _json_text,
    _other_kind,
    _stored_message,
    _stored_messages,
    _without_after_validators,
    bad_row,
    entry_columns,
)
from prism_om.stores.sqlite import reads
from prism_om.stores.sqlite.sql import BRANCH_PATH_CTE, branch_rows_sql

OLD_SQL = branch_rows_sql(f"e.depth, {entry_columns('e')}", "entries", "e")
WIRE = """'{"id":' || json_quote(e.id) || ',"sessionId":' || json_quote(e.session_id)
 || ',"parentId":' || json_quote(e.parent_id) || ',"kind":' || json_quote(e.kind)
 || ',"timestamp":' || json_quote(e.timestamp) || CASE e.kind
   WHEN 'message' THEN ',"message":' || e.body WHEN 'custom' THEN ',"data":' || e.body
   ELSE ',' || substr(e.body, 2) END || '}'"""
WIRE_SQL = f"""{BRANCH_PATH_CTE}
SELECT CAST({WIRE} AS BLOB) FROM branch_path bp CROSS JOIN entries e
WHERE e.segment_id = bp.segment_id
  AND e.depth BETWEEN max(bp.lo, :min_depth) AND min(bp.hi, :max_depth)"""
FLOOR_SQL = (
    "SELECT id, session_id, parent_id, kind, timestamp, body FROM entries "
    "WHERE session_id = ? ORDER BY seq"
)


def old_messages(rows: Any) -> Any:
    """``stores._rows._messages`` before this change."""
    texts = [_json_text(row) for row in rows]
    joined: Any
    if all(isinstance(text, bytes) for text in texts):
        joined = b"[" + b",".join(texts) + b"]"
    else:
        joined = "[" + ",".join(t if isinstance(t, str) else t.decode() for t in texts) + "]"
    try:
        parsed = _stored_messages().validate_json(joined)
    except ValueError:
        parsed = []
    if len(parsed) == len(rows):
        return parsed
    parsed = []
    for row, text in zip(rows, texts, strict=True):
        try:
            parsed.append(_stored_message(text))
        except ValueError as exc:
            raise bad_row(str(row[0]), "its stored JSON no longer parses") from exc
    return parsed


def old_entries_from_rows(rows: Any, version: int) -> list[SessionEntry]:
    """``stores._rows.entries_from_rows`` before this change (schema 4 rows)."""
    messages = [row for row in rows if row[3] == "message"]
    parsed = iter(old_messages(messages) if messages else ())
    return [
        _entry(row, next(parsed), None, None) if row[3] == "message" else _other_kind(row)
        for row in rows
    ]


async def old_branch_range(
    self: Any, position: Any, first_depth: int, last_depth: int
) -> list[SessionEntry]:
    """``SqliteReads._branch_range`` before this change, verbatim but for its SQL name."""
    first, last = max(first_depth, 0), min(last_depth, position.depth)
    if first > last:
        return []
    rows = await self._fetch(OLD_SQL, position.params(first, last))
    slots: list[SessionEntry | None] = [None] * (last - first + 1)
    with collector_paused():
        entries = self._parse_rows([row[1:] for row in rows])
        for (depth, *_), entry in zip(rows, entries, strict=True):
            slots[depth - first] = entry
    if any(slot is None for slot in slots):
        raise CorruptStoreError("missing depth")
    return [slot for slot in slots if slot is not None]


async def run(args: argparse.Namespace, path: str, fresh: bool) -> None:
    dataset = build_dataset(args.entries)
    store = await open_store(f"sqlite:{path}")
    if fresh:
        for i in range(0, args.entries, 1000):
            await store.append_many(dataset.entries[i : i + 1000])
    new_branch_range = reads.SqliteReads._branch_range
    new_entries_from_rows = reads.entries_from_rows
    conn = sqlite3.connect(path)
    position = await store._leaf_position(SESSION_ID, None)  # type: ignore[attr-defined]
    params = position.params()
    stripped = SchemaValidator(
        core_schema.list_schema(_without_after_validators(SessionEntry.__pydantic_core_schema__))
    )

    async def old() -> Any:
        reads.SqliteReads._branch_range = old_branch_range  # type: ignore[method-assign]
        reads.entries_from_rows = old_entries_from_rows
        try:
            return await store.entries(SESSION_ID)
        finally:
            reads.SqliteReads._branch_range = new_branch_range  # type: ignore[method-assign]
            reads.entries_from_rows = new_entries_from_rows

    async def new() -> Any:
        return await store.entries(SESSION_ID)

    async def wire() -> Any:
        with collector_paused():
            rows = conn.execute(WIRE_SQL, params).fetchall()
            return stripped.validate_json(b"[" + b",".join([r[0] for r in rows]) + b"]")

    async def floor() -> Any:
        rows = conn.execute(FLOOR_SQL, (SESSION_ID,)).fetchall()
        return [(*row[:5], json.loads(row[5])) for row in rows]

    async def floor_wire() -> Any:
        return [json.loads(r[0]) for r in conn.execute(WIRE_SQL, params).fetchall()]

    ways: dict[str, Callable[[], Awaitable[Any]]] = {
        "old": old,
        "new": new,
        "wire": wire,
        "floor": floor,
        "floor wire": floor_wire,
    }
    reference = await old()
    assert await new() == reference and await wire() == reference, "the reads disagree"
    del reference
    counts: dict[str, int] = {}
    in_gc: dict[str, float] = {}
    started = [0.0]

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            counts[current] = counts.get(current, 0) + 1
            started[0] = time.perf_counter()
        else:
            in_gc[current] = in_gc.get(current, 0.0) + time.perf_counter() - started[0]

    samples: dict[str, list[tuple[float, float, int, float]]] = {name: [] for name in ways}
    gc.collect()
    gc.callbacks.append(count)
    for _ in range(args.rounds):
        for current, way in ways.items():
            counts[current], in_gc[current] = 0, 0.0
            wall, cpu = time.perf_counter(), time.process_time()
            result = await way()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            samples[current].append((wall, cpu, counts[current], in_gc[current]))
            del result
    gc.callbacks.remove(count)
    await store.close()
    conn.close()
    print(f"{args.entries:,} entries, median of {args.rounds} rounds (machine shared)")
    base = statistics.median(s[0] for s in samples["floor"])
    for name, runs in samples.items():
        wall = statistics.median(s[0] for s in runs)
        cpu = statistics.median(s[1] for s in runs)
        collections = statistics.median(s[2] for s in runs)
        collecting = statistics.median(s[3] for s in runs)
        print(
            f"  {name:11} wall {wall * 1000:9.1f} ms  cpu {cpu * 1000:9.1f} ms  "
            f"{wall / base:5.2f}x floor  collections {collections:g} "
            f"taking {collecting * 1000:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--keep", default=None, help="a directory to keep the store in")
    args = parser.parse_args()
    path = os.path.join(args.keep or tempfile.mkdtemp(), f"branch-{args.entries}.db")
    asyncio.run(run(args, path, fresh=not os.path.exists(path)))


if __name__ == "__main__":
    main()
