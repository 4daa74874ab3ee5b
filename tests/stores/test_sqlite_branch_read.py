"""The whole-branch read of the SQL stores (issue 16): the same entries as validation
builds, in branch order over any forks, with no cyclic collection in the middle of the
bulk read, and a branch missing a depth still refused by name."""

from __future__ import annotations

import asyncio
import gc
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from support.postgres import with_fresh_schema

from prism_om.entries import SessionEntry, compaction_entry, custom_entry, message_entry
from prism_om.errors import CorruptStoreError
from prism_om.stores import SessionStore, open_store
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder, branch_builders

SQL_KINDS = ["sqlite", "postgres"]


def _url(kind: str, folder: Path, postgres_base: str) -> str:
    return with_fresh_schema(postgres_base) if kind == "postgres" else f"sqlite:{folder}.db"


def _tail(session_id: str, parent_id: str) -> list[SessionEntry]:
    """Entries of every payload shape: content parts, tool calls, unicode, a large body,
    compactions with and without data, a custom entry."""
    big = "long body " * 20_000
    made: list[SessionEntry] = []

    def add(entry: SessionEntry) -> None:
        made.append(entry)

    parent = parent_id
    shapes: list[Any] = [
        lambda p: message_entry(session_id, "user", 'héllo — 日本語 🙂 \\ " \n', parent_id=p),
        lambda p: message_entry(
            session_id,
            "assistant",
            [
                {"type": "thinking", "thinking": "ü"},
                {"type": "text", "text": "part"},
                {"type": "image", "url": "https://example.invalid/i.png", "mimeType": "image/png"},
            ],
            parent_id=p,
            tool_calls=[{"id": "call-1", "name": "look", "arguments": {"q": "ß", "n": [1, 2]}}],
        ),
        lambda p: message_entry(session_id, "tool", "found", parent_id=p, tool_call_id="call-1"),
        lambda p: message_entry(session_id, "assistant", big, parent_id=p),
        lambda p: compaction_entry(session_id, "summary ✓", parent_id=p),
        lambda p: compaction_entry(session_id, "with data", {"k": {"v": [None, 1.5]}}, parent_id=p),
        lambda p: custom_entry(session_id, {"type": "app.note", "text": "ℵ"}, parent_id=p),
    ]
    for shape in shapes:
        add(shape(parent))
        parent = made[-1].id
    return made


def _branch_to(entries: list[SessionEntry], leaf_id: str) -> list[SessionEntry]:
    by_id = {e.id: e for e in entries}
    branch: list[SessionEntry] = []
    current: str | None = leaf_id
    while current is not None:
        branch.append(by_id[current])
        current = by_id[current].parent_id
    branch.reverse()
    return branch


async def _check(kind: str, builder: BranchBuilder, folder: Path, postgres_base: str) -> None:
    async with await open_store(_url(kind, folder, postgres_base)) as store:
        await load_builder(store, builder, batch=5)
        sid = builder.session_id
        tail = _tail(sid, builder.path[-1].id)
        await store.append_many(tail)
        appended = [*builder.entries, *tail]
        for leaf in await store.leaves(sid):
            expected = _branch_to(appended, leaf)
            branch = await store.entries(sid, leaf)
            assert branch == expected
            # What validation set, and the bytes on the wire, not only equal values.
            assert [e.model_fields_set for e in branch] == [e.model_fields_set for e in expected]
            assert [e.to_json() for e in branch] == [e.to_json() for e in expected]
            middle = expected[len(expected) // 2]
            after = await store.entries_after(sid, middle.id, leaf)
            assert after == expected[len(expected) // 2 + 1 :]


@pytest.mark.parametrize("kind", SQL_KINDS)
def test_branch_reads_equal_the_validated_entries_on_generated_trees(
    kind: str, request: pytest.FixtureRequest
) -> None:
    base = request.getfixturevalue("postgres_base_url") if kind == "postgres" else ""
    runner = asyncio.Runner()
    root = Path(tempfile.mkdtemp(prefix="prism-branch-"))
    counter = iter(range(10_000))

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(builder=branch_builders(min_steps=1, max_steps=50))
    def check(builder: BranchBuilder) -> None:
        runner.run(_check(kind, builder, root / f"s{next(counter)}", base))

    try:
        check()
    finally:
        runner.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """Cyclic collections started while the fixture is live, per generation; the
    collector enabled at its default thresholds meanwhile."""
    started: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(int(info["generation"]))

    was_enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(700, 10, 10)
    gc.callbacks.append(count)
    try:
        yield started
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*thresholds)
        if not was_enabled:
            gc.disable()


async def _long_session(store: SessionStore, count: int) -> list[SessionEntry]:
    entries: list[SessionEntry] = []
    parent = None
    for n in range(count):
        entry = message_entry("long", "user", f"message {n}", parent_id=parent, entry_id=f"m{n}")
        entries.append(entry)
        parent = entry.id
    for start in range(0, count, 1000):
        await store.append_many(entries[start : start + 1000])
    return entries


@pytest.mark.parametrize("kind", SQL_KINDS)
async def test_a_whole_branch_read_runs_no_collection_midway(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, collections: list[int]
) -> None:
    # 5,000 rows are 5,000 new tuples and then some 20,000 tracked objects of entries:
    # with the collector running over them that is dozens of collections; paused, only
    # the one that runs when it resumes.
    base = request.getfixturevalue("postgres_base_url") if kind == "postgres" else ""
    async with await open_store(_url(kind, tmp_path / "long", base)) as store:
        entries = await _long_session(store, 5000)
        await store.leaf("long")
        gc.collect()
        collections.clear()
        branch = await store.entries("long")
        during = list(collections)
    assert branch == entries
    assert len(during) <= 1, f"{len(during)} collections ran during the read: {during}"


async def test_a_branch_missing_a_depth_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "gap.db"
    async with await open_store(f"sqlite:{path}") as store:
        await _long_session(store, 30)
    # A row moved off its depth, as a damaged or hand-edited file could hold.
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE entries SET depth = depth + 1000 WHERE id = 'm17'")
    conn.close()
    async with await open_store(f"sqlite:{path}") as store:
        with pytest.raises(CorruptStoreError, match=r"'m29' has no entry at depth 17"):
            await store.entries("long")
        with pytest.raises(CorruptStoreError, match=r"has no entry at depth 17"):
            await store.entries_after("long", "m3")
        # Reads that do not cross the gap are untouched.
        assert [e.id for e in await store.entries_after("long", "m20")] == [
            f"m{n}" for n in range(21, 30)
        ]


def _damaged_depth_index(path: Path, *statements: str) -> None:
    """Run ``statements`` on the file with the unique (segment_id, depth) index made a
    plain one of the same name, as a damaged index would let through."""
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX entries_segment_depth")
        conn.execute("CREATE INDEX entries_segment_depth ON entries (segment_id, depth)")
        for statement in statements:
            conn.execute(statement)
    conn.close()


async def test_two_rows_at_one_depth_are_refused(tmp_path: Path) -> None:
    # Only a damaged unique index on (segment_id, depth) holds two rows at one depth: the
    # file is damaged so, on a connection of the test's own.
    path = tmp_path / "twice.db"
    async with await open_store(f"sqlite:{path}") as store:
        await _long_session(store, 10)
    _damaged_depth_index(path, "UPDATE entries SET depth = 5 WHERE id = 'm4'")
    async with await open_store(f"sqlite:{path}") as store:
        with pytest.raises(CorruptStoreError, match=r"'m9' has no entry at depth 4"):
            await store.entries("long")
    _damaged_depth_index(
        path,
        "UPDATE entries SET depth = 4 WHERE id = 'm4'",
        "INSERT INTO entries (seq, id, session_id, parent_id, kind, role, custom_type, "
        "timestamp, depth, segment_id, tokens, token_encoding, path_tokens, body) "
        "SELECT 1000, 'm5-copy', session_id, parent_id, kind, role, custom_type, timestamp, "
        "depth, segment_id, tokens, token_encoding, path_tokens, body "
        "FROM entries WHERE id = 'm5'",
    )
    async with await open_store(f"sqlite:{path}") as store:
        with pytest.raises(CorruptStoreError, match=r"'m9' has more than one entry at a depth"):
            await store.entries("long")
