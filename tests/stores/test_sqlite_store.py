"""What only the SQLite adapter promises: indexed branch paths, its schema file, crash and
multi-process safety, corruption and version errors. The rules every adapter shares are
in the conformance suite."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import itertools
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from prism_om.entries import SessionEntry, custom_entry, message_entry
from prism_om.errors import (
    CorruptStoreError,
    DuplicateEntryError,
    InvalidInputError,
    MemoryRecordError,
    PrismMemoryError,
    RootExistsError,
    SessionMismatchError,
    StoreBusyError,
    StoreClosedError,
    StoreError,
    StoreRuleError,
    UnknownParentError,
)
from prism_om.stores import open_store
from prism_om.stores._schema import SCHEMA_VERSION, load_schema
from prism_om.stores.memory import MemoryStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.tokens import estimate_message_tokens, get_estimator

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().parents[1] / "support" / "crash_worker_sqlite.py"
TS = "2026-01-01T00:00:00.000Z"


def msg(session: str, entry_id: str, parent: str | None, text: str = "") -> SessionEntry:
    return message_entry(
        session,
        "user",
        text or f"text of {entry_id}",
        parent_id=parent,
        entry_id=entry_id,
        timestamp=TS,
    )


def chain(session: str, ids: Sequence[str], parent: str | None = None) -> list[SessionEntry]:
    """Entries with these ids, each the child of the one before."""
    out = []
    for entry_id in ids:
        out.append(msg(session, entry_id, parent))
        parent = entry_id
    return out


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(tmp_path / "store.db")
    try:
        yield opened
    finally:
        await opened.close()


def plain(path: Path) -> contextlib.closing[sqlite3.Connection]:
    """A plain sqlite3 connection in autocommit mode, closed on leaving ``with``."""
    return contextlib.closing(sqlite3.connect(path, isolation_level=None))


# -- opening --------------------------------------------------------------------------


async def test_open_store_with_relative_and_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with await open_store("sqlite:rel.db") as relative:
        assert relative.url == "sqlite:rel.db"
        await relative.append(msg("s", "r", None))
    absolute_path = tmp_path / "rel.db"
    for url in (f"sqlite:{absolute_path}", f"sqlite://{absolute_path}"):
        async with await open_store(url) as absolute:
            assert isinstance(absolute, SqliteStore)
            assert [e.id for e in await absolute.entries("s")] == ["r"]


async def test_open_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError):
        await SqliteStore.open(":memory:")
    with pytest.raises(InvalidInputError, match="synchronous"):
        await SqliteStore.open(tmp_path / "a.db", synchronous="OFF")
    with pytest.raises(InvalidInputError):
        await SqliteStore.open(tmp_path / "a.db", busy_timeout_ms=-1)
    with pytest.raises(StoreError):
        await SqliteStore.open(tmp_path / "no-such-dir" / "a.db")


async def test_file_settings(tmp_path: Path) -> None:
    path = tmp_path / "full.db"
    async with await SqliteStore.open(path, synchronous="full", busy_timeout_ms=1234) as store:
        settings = await store.connection_settings()
        for pragma, value in (("journal_mode", "wal"), ("synchronous", 2), ("busy_timeout", 1234)):
            assert settings[pragma] == value, pragma
    with plain(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


async def test_newer_schema_version_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    await (await SqliteStore.open(path)).close()
    with plain(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match=r"newer than version \d+.*upgrade prism-om"):
        await SqliteStore.open(path)


async def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    with plain(path) as conn:
        conn.execute("CREATE TABLE notes (x TEXT)")
    with pytest.raises(StoreError, match="not a prism_om store"):
        await SqliteStore.open(path)
    with plain(path) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]


@pytest.mark.parametrize("mark", ["CREATE TABLE notes (x TEXT)", "PRAGMA user_version = 7"])
async def test_a_foreign_sqlite_file_is_refused_before_anything_is_written(
    tmp_path: Path, mark: str
) -> None:
    # Switching the file to WAL alone rewrites its header (the journal-mode bytes).
    path = tmp_path / "foreign.db"
    with plain(path) as conn:
        conn.execute(mark)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a prism_om store"):
        await SqliteStore.open(path)
    assert path.read_bytes() == before
    assert await asyncio.to_thread(os.listdir, tmp_path) == ["foreign.db"]  # no -wal, -shm


async def test_unclosed_store_warns(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    leaked = await SqliteStore.open(tmp_path / "leak.db")
    # The store's two connection threads: what its open started, less the event loop's
    # to_thread pool and the builder of connections (worker_thread.py), which live on.
    threads = [
        t
        for t in threading.enumerate()
        if t not in before and not t.name.startswith(("asyncio_", "prism-om-sqlite-builder"))
    ]
    assert len(threads) == 2
    with pytest.warns(ResourceWarning, match="unclosed"):
        del leaked
        gc.collect()
    # The store stops its connection threads, so a leak cannot keep the process alive.
    for _ in range(500):
        if not any(t.is_alive() for t in threads):
            break
        await asyncio.sleep(0.01)
    assert not any(t.is_alive() for t in threads)


async def test_closed_store_refuses_everything(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "c.db")
    await store.append(msg("s", "r", None))
    await store.close()
    await store.close()
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.append(msg("s", "a", "r")),
        lambda: store.append_many([]),
        lambda: store.get("r"),
        lambda: store.list("s"),
        lambda: store.entries("s"),
        lambda: store.leaves("s"),
        lambda: store.leaf("s"),
        lambda: store.checkout("s", "r"),
        lambda: store.is_on_branch("s", "r"),
        lambda: store.sessions(),
        lambda: store.entry_count("s"),
        lambda: store.branch_tokens("s"),
    ]
    for call in calls:
        with pytest.raises(StoreClosedError):
            await call()


# -- the tree, compared with the reference store -----------------------------------------


def random_tree(rng: random.Random, session: str, size: int) -> list[SessionEntry]:
    """A tree where most appends continue a recent entry and many fork an old one."""
    entries = [msg(session, f"{session}-0", None, "x" * rng.randint(0, 60))]
    for index in range(1, size):
        pick = rng.random()
        if pick < 0.6:
            parent = entries[-1].id
        elif pick < 0.8:
            parent = entries[rng.randrange(max(0, len(entries) - 5), len(entries))].id
        else:
            parent = rng.choice(entries).id
        entries.append(msg(session, f"{session}-{index}", parent, "y" * rng.randint(0, 60)))
    return entries


async def test_random_trees_match_the_memory_store(store: SqliteStore) -> None:
    rng = random.Random(7)
    reference = MemoryStore()
    async with reference:
        for session in ("a", "b"):
            entries = random_tree(rng, session, 160)
            position = 0
            while position < len(entries):
                size = rng.choice([1, 1, 2, 5, 17])
                batch = entries[position : position + size]
                await store.append_many(batch)
                await reference.append_many(batch)
                position += size
        for session in ("a", "b", "unknown"):
            assert await store.list(session) == await reference.list(session)
            assert await store.leaves(session) == await reference.leaves(session)
            assert await store.leaf(session) == await reference.leaf(session)
            ids = [e.id for e in await reference.list(session)]
            for leaf in [None, *ids]:
                expected = await reference.entries(session, leaf)
                assert await store.entries(session, leaf) == expected
                assert await store.entry_count(session, leaf) == len(expected)
                assert await store.branch_tokens(session, leaf) == estimate_message_tokens(
                    expected, get_estimator()
                )
                probes = rng.sample(ids, min(12, len(ids)))
                for probe in [*probes, "missing", "b-0" if session == "a" else "a-0"]:
                    assert await store.is_on_branch(session, probe, leaf) == (
                        await reference.is_on_branch(session, probe, leaf)
                    )
        assert await store.sessions() == await reference.sessions() == ["a", "b"]


async def test_branch_pieces_are_one_per_fork(store: SqliteStore) -> None:
    # A main line with a side entry every 10 entries: the main line continues as a
    # second child each time, so the path crosses a new segment at every fork.
    entries, parent = [], None
    for index in range(100):
        entries.append(msg("s", f"m{index}", parent))
        if index % 10 == 9:
            entries.append(msg("s", f"side{index}", f"m{index}"))
        parent = f"m{index}"
    await store.append_many(entries)

    async def pieces(leaf: str) -> list[tuple[int, int, int]]:
        """The branch's (segment, first depth, last depth) pieces, read from the file."""
        ids = [e.id for e in await store.entries("s", leaf)]
        with plain(Path(store.url.removeprefix("sqlite:"))) as conn:
            marks = ", ".join("?" * len(ids))
            return conn.execute(
                "SELECT segment_id, min(depth), max(depth) FROM entries "
                f"WHERE id IN ({marks}) GROUP BY segment_id ORDER BY min(depth)",
                ids,
            ).fetchall()

    main = await pieces("m99")
    assert len(main) == 10
    assert main[0][1] == 0 and main[-1][2] == 99
    assert all(a[2] + 1 == b[1] for a, b in itertools.pairwise(main))
    # side9 came first, so it continued m9's segment and m10 started a new one.
    assert await pieces("side9") == [(1, 0, 10)]
    assert await pieces("m10") == [(1, 0, 9), (2, 10, 10)]
    # A range in the middle of a many-piece branch is read across the pieces.
    page, more = await store.page_messages("s", "m34", 20, leaf_id="m99")
    assert [e.id for e in page] == [f"m{i}" for i in range(35, 55)] and more


def plan(path: Path, sql: str, params: object) -> list[str]:
    with plain(path) as conn:
        return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]  # type: ignore[arg-type]


async def test_branch_queries_search_indexes_only(tmp_path: Path) -> None:
    from prism_om.stores.sql import statements as adapter

    path = tmp_path / "plan.db"
    async with await SqliteStore.open(path) as store:
        rng = random.Random(3)
        await store.append_many(random_tree(rng, "s", 300))
    with plain(path) as conn:
        segment, depth = conn.execute(
            "SELECT e.segment_id, e.depth FROM sessions s JOIN entries e ON e.id = s.leaf_id "
            "WHERE s.session_id = 's'"
        ).fetchone()
    params = {
        "leaf_segment": segment,
        "leaf_depth": depth,
        "min_depth": 0,
        "max_depth": depth,
        "entry_id": "s-5",
        "encoding": "x",
        "observations_type": "om.observations.recorded",
        "reflections_type": "om.reflections.recorded",
    }
    queries = {
        "branch": adapter.BRANCH_ENTRIES_SQL,
        "is_on_branch": adapter.DEPTH_ON_BRANCH_SQL,
        "pieces": adapter.BRANCH_PIECES_SQL,
        "branch_tokens": adapter.BRANCH_TOKENS_SQL,
        "ledger observations": adapter.LEDGER_SQL["observations"],
        "ledger reflections": adapter.LEDGER_SQL["reflections"],
        "ledger drops": adapter.LEDGER_SQL["drops"],
        "ledger markers": adapter.LEDGER_SQL["markers"],
        "scope records": adapter.SCOPE_RECORDS_SQL,
    }
    for name, sql in queries.items():
        steps = plan(path, sql, params)
        # Only the few pieces of the path are scanned; entries and segments are searched.
        scans = [
            s for s in steps if s.startswith("SCAN") and s not in {"SCAN bp", "SCAN branch_path"}
        ]
        assert scans in ([], ["SCAN CONSTANT ROW"]), (name, steps)
        assert any(s.startswith("SEARCH s USING INTEGER PRIMARY KEY") for s in steps), (name, steps)
        if name != "pieces":
            searched = ("SEARCH e USING", "SEARCH o USING", "SEARCH r USING", "SEARCH d USING")
            searched += ("SEARCH m USING", "SEARCH s USING INDEX om_scope")
            assert any(s.startswith(searched) for s in steps), (name, steps)
    get_plan = plan(path, "SELECT id, CAST(body AS BLOB) FROM entries WHERE id = ?", ("s-5",))
    assert get_plan == ["SEARCH entries USING INDEX sqlite_autoindex_entries_1 (id=?)"]
    for sql in (adapter.RECENT_MESSAGES_SQL, adapter.PAGE_FORWARD_SQL):
        steps = plan(path, sql, (1, 0, 9, "a", "b", "c", 5))
        search = "SEARCH entries USING INDEX entries_segment_depth"
        assert steps == [f"{search} (segment_id=? AND depth>? AND depth<?)"]
    subset = plan(path, adapter.MEMORY_SUBSET_SQL.format(marks="?"), (1, 9, "a", "b", "c"))
    for alias, index in (("o", "om_observations_memory"), ("r", "om_reflections_memory")):
        assert any(f"SEARCH {alias} USING INDEX {index} (memory_id=?)" in s for s in subset), subset
    assert any("SEARCH d USING INDEX om_drops_memory (memory_id=?)" in s for s in subset), subset
    assert not [
        s for s in subset if s.startswith("SCAN") and "bp" not in s and "branch_path" not in s
    ]
    for table in ("om_observations", "om_reflections"):
        sql = adapter.MEMORY_BY_ID_SQL.format(table=table, marks="?, ?")
        assert plan(path, sql, ("aaaaaaaaaaaa", "bbbbbbbbbbbb")) == [
            f"SEARCH {table} USING INDEX {table}_memory (memory_id=?)"
        ]


async def test_batch_leaf_and_checkout_persist(tmp_path: Path) -> None:
    path = tmp_path / "leaf.db"
    async with await SqliteStore.open(path) as store:
        await store.append_many(chain("s", ["r", "a", "b"]))
        assert await store.leaf("s") == "b"
        await store.checkout("s", "a")
        await store.append(msg("s", "c", "a"))
        await store.checkout("s", "b")
    async with await SqliteStore.open(path) as store:
        assert await store.leaf("s") == "b"
        assert await store.leaves("s") == ["b", "c"]
        assert [e.id for e in await store.entries("s")] == ["r", "a", "b"]


def bad_record(parent: str) -> SessionEntry:
    return custom_entry("s", {"type": "om.unknown.kind"}, parent_id=parent, entry_id="rec")


def dropped(parent: str, observation_id: str) -> SessionEntry:
    data = {"type": "om.observations.dropped", "observationIds": [observation_id]}
    return custom_entry("s", data, parent_id=parent, entry_id="drop")


async def test_rule_errors_match_the_memory_store_and_write_nothing(store: SqliteStore) -> None:
    reference = MemoryStore()
    base = [*chain("s", ["r", "a", "b"]), *chain("t", ["t0"])]
    for target in (store, reference):
        await target.append_many(base[:3])
        await target.append_many(base[3:])
    cases = [
        [msg("s", "x1", "b"), msg("s", "a", "x1"), msg("s", "x2", "nowhere")],  # duplicate first
        [msg("s", "x1", "b"), msg("s", "x2", "nowhere"), msg("s", "a", "x2")],  # parent first
        [msg("s", "x1", "b"), msg("s", "x2", None)],
        [msg("s", "x1", "b"), msg("s", "x2", "t0")],
        [msg("s", "x1", "b"), msg("s", "x2", "x3"), msg("s", "x3", "x1")],
        [msg("s", "x1", "b"), msg("s", "x2", "x1"), msg("s", "b", "x2")],  # duplicate at the end
        [msg("u", "u0", None), msg("u", "u1", "u0"), msg("u", "r", "u1")],
        [msg("s", "x1", "b"), bad_record("x1"), msg("s", "x2", "nowhere")],  # record first
        [msg("s", "x1", "b"), msg("s", "x2", "nowhere"), bad_record("x1")],  # parent first
        [msg("s", "x1", "b"), bad_record("x1"), msg("s", "a", "x1")],  # record, then duplicate
        [msg("s", "a", "b"), bad_record("b")],  # duplicate, then record
        [msg("s", "x1", "b"), dropped("x1", "aaaaaaaaaaaa")],  # drops an unknown observation
    ]
    before = {
        "list": await store.list("s"),
        "leaves": await store.leaves("s"),
        "sessions": await store.sessions(),
    }
    for batch in cases:
        errors = []
        for target in (store, reference):
            with pytest.raises(StoreRuleError) as caught:
                await target.append_many(batch)
            errors.append(type(caught.value))
        assert errors[0] is errors[1], [e.id for e in batch]
        assert errors[0] in {
            DuplicateEntryError,
            UnknownParentError,
            RootExistsError,
            SessionMismatchError,
            MemoryRecordError,
        }
    assert await store.list("s") == before["list"]
    assert await store.leaves("s") == before["leaves"]
    assert await store.sessions() == before["sessions"]
    assert await store.leaf("s") == "b"
    assert await store.list("u") == []


async def test_branch_tokens_recount_entries_of_another_encoding(tmp_path: Path) -> None:
    entries = chain("s", [f"e{i}" for i in range(12)])
    entries.insert(5, custom_entry("s", {"type": "note", "n": 1}, parent_id="e4", entry_id="c"))
    entries[6] = msg("s", "e5", "c", "after the custom entry")
    main = get_estimator()
    path = tmp_path / "tokens.db"
    async with await SqliteStore.open(path) as first:
        await first.append_many(entries[:4])
    # As if an older version counted these with another encoding.
    async with await SqliteStore.open(path, token_estimator=get_estimator("chars/4")) as older:
        await older.append_many(entries[4:8])
    async with await SqliteStore.open(path) as store:
        await store.append_many(entries[8:])
        expected = estimate_message_tokens(entries, main)
        assert await store.branch_tokens("s") == expected
        assert await store.branch_tokens("s", "e2") == estimate_message_tokens(entries[:3], main)
        assert await store.entry_count("s") == len(entries)
        assert await store.entry_count("unknown") == 0
        assert await store.branch_tokens("unknown") == 0


# -- concurrency ----------------------------------------------------------------------


async def test_fifty_tasks_one_failing_batch(store: SqliteStore) -> None:
    await store.append(msg("pre", "taken", None))

    async def one(task: int) -> None:
        ids = [f"t{task}-{i}" for i in range(20)]
        if task == 17:
            ids[10] = "taken"  # stored already: the batch must vanish whole
        await asyncio.sleep(random.random() / 1000)
        await store.append_many(chain(f"t{task}", ids))

    results = await asyncio.gather(*(one(t) for t in range(50)), return_exceptions=True)
    failed = [t for t, r in enumerate(results) if isinstance(r, BaseException)]
    assert failed == [17]
    assert isinstance(results[17], DuplicateEntryError)
    assert await store.list("t17") == []
    assert await store.leaf("t17") is None
    assert "t17" not in await store.sessions()
    for task in set(range(50)) - {17}:
        ids = [e.id for e in await store.list(f"t{task}")]
        assert ids == [f"t{task}-{i}" for i in range(20)]
        assert [e.id for e in await store.entries(f"t{task}")] == ids
    assert len(await store.sessions()) == 50


async def test_busy_file_raises_store_busy_error(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    async with await SqliteStore.open(path, busy_timeout_ms=20) as store:
        await store.append(msg("s", "r", None))
        with plain(path) as other:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreBusyError) as caught:
                await store.append(msg("s", "a", "r"))
            assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
            # Reads do not wait for the writer in WAL mode.
            assert [e.id for e in await store.entries("s")] == ["r"]
            other.execute("ROLLBACK")
        await store.append(msg("s", "a", "r"))
        assert await store.leaf("s") == "a"


@pytest.mark.slow
def test_two_processes_append_to_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "append", str(path), f"p{n}", "1000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    # Every worker is waited for before any assertion, so a failure leaves no process
    # running into the next test.
    results = [(proc, *proc.communicate(timeout=180)) for proc in procs]
    for proc, out, err in results:
        assert proc.returncode == 0, err
        assert out.strip() == "done"
        assert "sqlite3" not in err and "Traceback" not in err

    async def check() -> None:
        async with await SqliteStore.open(path) as store:
            for n in range(2):
                ids = [e.id for e in await store.list(f"p{n}")]
                assert ids == [f"p{n}.{i}" for i in range(1000)]
                assert await store.entry_count(f"p{n}") == 1000

    asyncio.run(check())
    with plain(path) as conn:
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 2000


def _read_lines(stream: object, into: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.append(line)


def _batches(ids: Sequence[str]) -> dict[int, list[tuple[int, int]]]:
    """Batch number -> (size, index) of each stored entry, from ids ``S.bK.nN.iI``."""
    batches: dict[int, list[tuple[int, int]]] = {}
    for entry_id in ids:
        _, k, n, i = entry_id.split(".")
        batches.setdefault(int(k[1:]), []).append((int(n[1:]), int(i[1:])))
    return batches


@pytest.mark.slow
def test_sigkill_keeps_batches_whole(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    rng = random.Random(20260101)
    reported: dict[str, set[int]] = {}
    for run in range(9):
        session = f"run{run}"
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), "crash", str(path), session, str(run)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []
        reader = threading.Thread(target=_read_lines, args=(proc.stdout, lines))
        reader.start()
        # Kill at a random moment: sometimes while opening, mostly mid-append.
        wanted = 0 if run == 0 else rng.randint(1, 40)
        deadline = time.monotonic() + 60
        while len(lines) < wanted and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.3 if wanted == 0 else 0.02))
        proc.kill()
        proc.wait(timeout=30)
        reader.join(timeout=30)
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.stderr.close()
        assert proc.stdout is not None
        proc.stdout.close()
        assert "Traceback" not in err, err
        reported[session] = {int(line.split()[0]) for line in lines if line.endswith("\n")}

    async def check() -> None:
        async with await SqliteStore.open(path) as store:
            for session, committed in reported.items():
                stored = await store.list(session)
                batches = _batches([e.id for e in stored])
                for number, members in batches.items():
                    size = members[0][0]
                    assert sorted(i for _, i in members) == list(range(size)), (session, number)
                assert committed <= set(batches), (session, committed - set(batches))
                assert set(batches) == set(range(len(batches)))
                assert await store.entries(session) == stored

    asyncio.run(check())
    with plain(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert sum(len(v) for v in reported.values()) > 0


# -- corruption -----------------------------------------------------------------------


async def _build_file(path: Path, size: int = 2000) -> None:
    async with await SqliteStore.open(path) as store:
        await store.append_many(
            [msg("s", f"e{i:05d}", f"e{i - 1:05d}" if i else None, "z" * 300) for i in range(size)]
        )


async def _use(path: Path) -> None:
    """Open the file and touch every kind of read and one write."""
    async with await SqliteStore.open(path) as store:
        await store.list("s")
        await store.entries("s")
        await store.leaves("s")
        await store.get("e00100")
        await store.append(msg("s", "after", await store.leaf("s")))


async def _expect_corrupt(path: Path) -> None:
    with pytest.raises(CorruptStoreError):
        await asyncio.wait_for(_use(path), timeout=30)


def _flip(path: Path, offsets: Sequence[int]) -> None:
    with path.open("r+b") as handle:
        for offset in offsets:
            handle.seek(offset)
            byte = handle.read(1)[0]
            handle.seek(offset)
            handle.write(bytes([byte ^ 0xFF]))


@pytest.mark.parametrize(
    "offsets", [range(0, 16), [16, 17], [18, 19], [28, 29, 30, 31], range(100)]
)
async def test_flipped_header_bytes(tmp_path: Path, offsets: Sequence[int]) -> None:
    path = tmp_path / "header.db"
    await _build_file(path)
    _flip(path, offsets)
    await _expect_corrupt(path)


async def test_flipped_page_bytes(tmp_path: Path) -> None:
    source = tmp_path / "pages.db"
    await _build_file(source)
    data = source.read_bytes()
    page_size = int.from_bytes(data[16:18], "big")
    pages = len(data) // page_size
    # Pages of the entries table hold the bodies; list("s") reads every one of them.
    body_pages = [
        n for n in range(1, pages) if b"z" * 64 in data[n * page_size : (n + 1) * page_size]
    ]
    assert len(body_pages) > 20
    targets = {
        "schema page": (100, 112),
        **{
            f"entries page {n}": (n * page_size, n * page_size + 12)
            for n in (body_pages[0], body_pages[len(body_pages) // 2], body_pages[-1])
        },
    }
    for name, (start, stop) in targets.items():
        flipped = tmp_path / f"flipped {name}.db"
        shutil.copy(source, flipped)
        # The b-tree page header: page type, free blocks, cell count, content offset.
        _flip(flipped, range(start, stop))
        await _expect_corrupt(flipped)
        if start < page_size:
            continue
        garbage = tmp_path / f"garbage {name}.db"
        shutil.copy(source, garbage)
        with garbage.open("r+b") as handle:
            handle.seek(start)
            handle.write(random.Random(start).randbytes(page_size))
        await _expect_corrupt(garbage)


async def test_row_with_broken_json_names_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "row.db"
    async with await SqliteStore.open(path) as store:
        await store.append_many(chain("s", ["r", "a", "b"]))
    with plain(path) as conn:
        conn.execute("UPDATE entries SET body = '{\"id\": \"a\", broken' WHERE id = 'a'")
    async with await SqliteStore.open(path) as store:
        for read in (store.get("a"), store.list("s"), store.entries("s")):
            with pytest.raises(CorruptStoreError, match="'a'"):
                await read
        assert (await store.get("r")) is not None
    with plain(path) as conn:
        conn.execute("UPDATE entries SET body = CAST(x'7b22ff' AS TEXT) WHERE id = 'b'")
    async with await SqliteStore.open(path) as store:
        with pytest.raises(CorruptStoreError, match="'b'"):
            await store.get("b")


async def test_no_raw_sqlite_error_escapes_a_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "cut.db"
    await _build_file(path)
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size // 3)
    with pytest.raises(PrismMemoryError):
        await asyncio.wait_for(_use(path), timeout=30)


# -- the schema file ------------------------------------------------------------------


def _without_rowid_dropped(node: Any) -> Any:
    from sqlglot import exp

    return None if isinstance(node, exp.WithoutRowidProperty) else node


def test_schema_transpiles_to_postgres(caplog: pytest.LogCaptureFixture) -> None:
    sqlglot = pytest.importorskip("sqlglot")
    schema = load_schema()
    assert Path(schema.origin).resolve() == (
        ROOT / "schema.sql"
    ).resolve() or schema.origin.endswith(os.path.join("prism_om", "schema.sql"))
    translated = []
    for statement in schema.statements:
        tree = sqlglot.parse_one(statement, read="sqlite")
        # sqlglot keeps what it cannot parse as an opaque Command: none may be left.
        assert isinstance(tree, sqlglot.exp.Create), statement
        # Tables and indexes only: no triggers, views or pragmas.
        assert tree.args["kind"] in {"TABLE", "INDEX"}, statement
        # The one SQLite-only clause: WITHOUT ROWID, a storage layout that the PostgreSQL
        # dialect drops (stores/postgres/dialect.py); nothing else may need a rewrite.
        tree = tree.transform(_without_rowid_dropped)
        translated.append(tree.sql(dialect="postgres", unsupported_level=sqlglot.ErrorLevel.RAISE))
    whole = [
        tree.transform(_without_rowid_dropped).sql(
            dialect="postgres", unsupported_level=sqlglot.ErrorLevel.RAISE
        )
        for tree in sqlglot.parse(schema.text, read="sqlite")
        if tree is not None
    ]
    assert len([s for s in whole if s.strip()]) == len(schema.statements)
    tables = (
        "sessions",
        "segments",
        "entries",
        "om_observations",
        "om_observation_sources",
        "om_reflections",
        "om_drops",
        "om_markers",
        "om_scope_records",
        "om_supersessions",
        "session_summary",
        "om_live",
        "search_terms",
        "search_blocks",
        "search_indexed",
    )
    for table in tables:
        assert any(s.startswith(f"CREATE TABLE IF NOT EXISTS {table} (") for s in translated), table
    indexes = sum(s.startswith(("CREATE INDEX", "CREATE UNIQUE INDEX")) for s in translated)
    assert indexes == sum(" INDEX " in s for s in schema.statements)
    assert len(translated) == len(tables) + indexes
    assert not [r for r in caplog.records if r.name.startswith("sqlglot")]


def _site_dirs() -> list[str]:
    """Where this interpreter finds its installed dependencies."""
    import site
    import sysconfig

    paths = [
        *site.getsitepackages(),
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    ]
    return list(dict.fromkeys(p for p in paths if Path(p).is_dir()))


INSTALLED_SCRIPT = """
import asyncio, json, sys
import prism_om
from prism_om.entries import message_entry
from prism_om.stores import open_store
from prism_om.stores._schema import load_schema

async def main(path):
    store = await open_store("sqlite:" + path)
    try:
        await store.append(message_entry("s", "user", "hello", entry_id="r"))
        await store.append(message_entry("s", "assistant", "hi", parent_id="r", entry_id="a"))
        branch = [e.id for e in await store.entries("s")]
    finally:
        await store.close()
    schema = load_schema()
    print(json.dumps({"package": prism_om.__file__, "origin": schema.origin,
                      "text": schema.text, "branch": branch}))

asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.slow
def test_store_opens_from_a_wheel_install(tmp_path: Path) -> None:
    if importlib.util.find_spec("build") is None:
        pytest.skip("the 'build' package is not installed")
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "schema.sql"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "prism_om", source / "prism_om", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = tmp_path / "dist"
    command = [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(source)]
    has_backend = importlib.util.find_spec("hatchling") is not None
    if has_backend:
        command.insert(4, "--no-isolation")
    built = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if built.returncode != 0:
        output = built.stdout + built.stderr
        offline = ("No matching distribution", "Could not find a version", "Network is unreachable")
        if not has_backend and any(word in output for word in offline):
            pytest.skip("no hatchling here and none can be downloaded")
        pytest.fail(f"wheel build failed:\n{output[-4000:]}")
    (wheel,) = dist.glob("*.whl")

    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    site_packages = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # Dependencies (aiosqlite, pydantic, tiktoken) come from this interpreter, after the
    # venv's own site-packages, so prism_om itself is the installed wheel.
    Path(site_packages, "zz_test_dependencies.pth").write_text("\n".join(_site_dirs()) + "\n")
    run = subprocess.run(
        [str(python), "-I", "-c", INSTALLED_SCRIPT, str(tmp_path / "wheel.db")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    package_dir = Path(site_packages) / "prism_om"
    assert Path(report["package"]).parent == package_dir
    assert Path(report["origin"]) == package_dir / "schema.sql"
    assert report["text"] == (ROOT / "schema.sql").read_text(encoding="utf-8")
    assert report["branch"] == ["r", "a"]
