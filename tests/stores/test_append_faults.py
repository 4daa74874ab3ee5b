"""The append fault seam (``prism_om.testing.faults``), honoured by every adapter."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from prism_om.entries import SessionEntry, message_entry
from prism_om.stores import SessionStore, open_store
from prism_om.stores.memory import MemoryStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.conformance import snapshot
from prism_om.testing.faults import InjectedFault, fail_on, inject_append_fault
from prism_om.testing.tree_only import TreeOnlyStore

KINDS = ["memory", "jsonl", "sqlite", "tree-only"]


def msg(entry_id: str, parent: str | None, session: str = "s") -> SessionEntry:
    return message_entry(
        session, "user", f"text of {entry_id}", parent_id=parent, entry_id=entry_id
    )


async def open_kind(kind: str, tmp_path: Path) -> SessionStore:
    if kind == "memory":
        return MemoryStore()
    if kind == "tree-only":
        return TreeOnlyStore()
    if kind == "jsonl":
        return await open_store(f"jsonl:{tmp_path / 'store'}")
    return await open_store(f"sqlite:{tmp_path / 'store.db'}")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_raising_fault_stores_nothing_and_the_store_goes_on(
    kind: str, tmp_path: Path
) -> None:
    async with await open_kind(kind, tmp_path) as store:
        await store.append_many([msg("r", None), msg("a", "r")])
        before = await snapshot(store)
        with inject_append_fault(store, fail_on("c")):
            with pytest.raises(InjectedFault):
                await store.append_many([msg("b", "a"), msg("c", "b")])
            assert await snapshot(store) == before
            with pytest.raises(InjectedFault):
                await store.append_at_leaf([msg("c", None)])
            assert await snapshot(store) == before
            # A batch the fault lets through is stored while it stays installed.
            await store.append(msg("b", "a"))
        await store.append(msg("c", "b"))
        assert [e.id for e in await store.entries("s")] == ["r", "a", "b", "c"]
        assert await store.entry_count("s") == 4
    if kind in ("jsonl", "sqlite"):
        async with await open_kind(kind, tmp_path) as reopened:
            assert [e.id for e in await reopened.entries("s")] == ["r", "a", "b", "c"]


@pytest.mark.parametrize("kind", KINDS)
async def test_the_fault_sees_the_batch_as_it_will_be_stored(kind: str, tmp_path: Path) -> None:
    seen: list[list[tuple[str, str | None]]] = []

    def record(batch: Sequence[SessionEntry]) -> None:
        seen.append([(e.id, e.parent_id) for e in batch])

    async with await open_kind(kind, tmp_path) as store:
        with inject_append_fault(store, record):
            await store.append_many([msg("r", None), msg("a", "r")])
            await store.append_at_leaf([msg("b", None), msg("c", None)])
        await store.append(msg("d", "c"))  # the fault is gone
    assert seen == [[("r", None), ("a", "r")], [("b", "a"), ("c", "b")]]


async def test_the_sqlite_fault_runs_inside_the_transaction(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with await SqliteStore.open(path) as store:
        with inject_append_fault(store, fail_on("bad")):
            await store.append_many([msg("r", None), msg("a", "r")])
            with pytest.raises(InjectedFault):
                await store.append_many([msg("ok", "a"), msg("bad", "ok")])
        assert [e.id for e in await store.list("s")] == ["r", "a"]
    # Placement as the old append hook saw it: depth and segment of each row.
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT id, depth, segment_id FROM entries ORDER BY seq").fetchall()
    assert rows == [("r", 0, 1), ("a", 1, 1)]


async def test_faults_refuse_a_store_without_the_point_and_do_not_nest() -> None:
    with pytest.raises(TypeError, match="fault point"), inject_append_fault(object(), print):
        pass
    async with MemoryStore() as store:
        with inject_append_fault(store, fail_on("x")):
            with pytest.raises(RuntimeError, match="already"), inject_append_fault(store, print):
                pass
            with pytest.raises(InjectedFault):
                await store.append(msg("x", None))
        await store.append(msg("x", None))


KILLER = textwrap.dedent(
    """
    import asyncio, os, sys
    from prism_om.entries import message_entry
    from prism_om.stores import open_store
    from prism_om.testing.faults import inject_append_fault

    def die(batch):
        os._exit(9)

    async def main(url):
        store = await open_store(url)
        batch = [message_entry("s", "user", "b" * 5000, parent_id="a", entry_id="b")]
        batch.append(message_entry("s", "user", "c", parent_id="b", entry_id="c"))
        with inject_append_fault(store, die):
            await store.append_many(batch)

    asyncio.run(main(sys.argv[1]))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_a_process_killed_at_the_fault_point_leaves_no_part_of_the_batch(
    kind: str, tmp_path: Path
) -> None:
    url = f"jsonl:{tmp_path / 'store'}" if kind == "jsonl" else f"sqlite:{tmp_path / 'store.db'}"
    async with await open_store(url) as store:
        await store.append_many([msg("r", None), msg("a", "r")])
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", KILLER, url], capture_output=True, timeout=60
    )
    assert done.returncode == 9, done.stderr
    async with await open_store(url) as store:
        assert [e.id for e in await store.list("s")] == ["r", "a"]
        assert await store.leaf("s") == "a"
        await store.append_many([msg("b", "a"), msg("c", "b")])
        assert [e.id for e in await store.entries("s")] == ["r", "a", "b", "c"]
