"""The SQL work of one public SQLite read: a page, a recall, the turn's reads.

Counted at the driver (``support.sql_work``: the statements every connection of the store
runs, and the rows they hand back), never inside the store, so moving a read to another
connection or thread keeps these green, and a read that walks more of the file turns them
red. No clock is read. Every answer is also checked against the reference
(``MemoryStore`` or the pure function over the branch); that pages and recalls equal the
reference on every branch and cursor kind is ``MemoryConformance``'s job
(tests/stores/test_memory_conformance.py), not repeated here.
"""

from __future__ import annotations

import random
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from support.forked_sessions import forked_session
from support.sql_work import Run, Traced, statements

from bench.data import SESSION_ID, build_dataset
from prism_om.core.records import REFLECTIONS_RECORDED
from prism_om.entries import Role, SessionEntry
from prism_om.errors import (
    EntryNotFoundError,
    InvalidInputError,
    InvalidSessionIdError,
    SessionMismatchError,
    StoreClosedError,
)
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.observational_memory.page import (
    recall_observational_memory_branch_page_from_store,
)
from prism_om.stores.memory import MemoryStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.generate import make_message
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder

from ..observational_memory.test_recall import Story

PAGE_STATEMENTS_MAX = 4
"""Statements of one page (housekeeping aside): the cursor, the branch's pieces (when not
kept from an earlier page), the rows of one or two pieces. A page that walked the branch
entry by entry, or read it whole to cut a page out, would need more, or more rows."""

PAGE_CALLS_MAX = 44
"""prism_om Python calls of one public page of 20 (``sys.setprofile``): 33 when the function
handed checked arguments to a private store method; the declared ``page_message_parts``
(a public store method, so it checks its own arguments) added 11. A bound against a read
growing a loop or a second pass."""


def chain(session_id: str, count: int, prefix: str = "t") -> list[SessionEntry]:
    """``count`` messages in one line, user and assistant in turn."""
    entries, parent = [], None
    for n in range(count):
        role: Role = "user" if n % 2 == 0 else "assistant"
        entries.append(make_message(session_id, f"{prefix}{n}", parent, role, f"message {n}", n))
        parent = entries[-1].id
    return entries


async def traced_store(monkeypatch: pytest.MonkeyPatch, path: Path) -> tuple[SqliteStore, Traced]:
    with statements(monkeypatch) as traced:
        store = await SqliteStore.open(path)
    return store, traced


async def counted(traced: Traced, call: Callable[[], Awaitable[Any]]) -> tuple[Any, Run]:
    with traced.counting() as run:
        answer = await call()
    return answer, run


@pytest.fixture
async def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The forked session on SQLite (traced) and on the reference store."""
    store, traced = await traced_store(monkeypatch, tmp_path / "p.db")
    memory = MemoryStore()
    async with store:
        for target in (store, memory):
            await target.append_many(forked_session())
        yield store, memory, traced


# -- pages -------------------------------------------------------------------------------


async def test_every_page_is_a_few_statements_reading_about_its_rows(pair: Any) -> None:
    store, memory, traced = pair
    for leaf in [None, *await memory.leaves("p")]:
        for cursor in (await memory.entries("p", leaf))[::4]:
            for limit in (1, 7, 20, 63, 64, 100):
                for way in ("forward", "backward"):
                    expected = await memory.page_messages("p", cursor.id, limit, way, leaf)
                    with traced.counting() as run:
                        got = await store.page_messages("p", cursor.id, limit, way, leaf)
                    assert got == expected, (leaf, cursor.id, limit, way)
                    assert run.count <= PAGE_STATEMENTS_MAX, run.statements
                    # The page's rows, one more to say whether there are more, the cursor's
                    # row, the branch's pieces (four segments at most here), no more.
                    assert run.rows <= len(got[0]) + 2 + 2 * 4, (run.rows, run.statements)


async def test_a_page_inside_one_piece_is_two_statements_at_most(pair: Any) -> None:
    store, _, traced = pair
    await store.page_messages("p", "f1-2", 10, "forward", "f1-24")  # the pieces, read once
    (page, more), run = await counted(
        traced, lambda: store.page_messages("p", "f1-2", 10, "forward", "f1-24")
    )
    assert [e.id for e in page] == [f"f1-{n}" for n in range(3, 13)] and more
    assert run.count <= 2, run.statements  # the cursor, the rows (or both in one)
    # Across the fork point: the trunk's piece is read by one more statement.
    (page, _), across = await counted(
        traced, lambda: store.page_messages("p", "f1-1", 10, "backward", "f1-24")
    )
    assert [e.id for e in page][-1] == "f1-0"
    assert across.count <= 3, across.statements


async def test_later_pages_of_a_branch_cost_less_until_another_connection_commits(
    pair: Any,
) -> None:
    # The first page of a branch may read its pieces; later ones need not while no other
    # connection has committed (this store's writer included), and must after: a page
    # from kept pieces would miss the new entry.
    store, memory, traced = pair
    _, first = await counted(traced, lambda: store.page_messages("p", "t30", 5, "forward"))
    later = []
    for cursor in ("t31", "t40", "t2"):
        with traced.counting() as run:
            await store.page_messages("p", cursor, 5, "backward")
        later.append(run.count)
    assert max(later) <= 2 and first.count <= 3, (first.statements, later)
    tail = (await memory.entries("p"))[-1]
    more = make_message("p", "new", tail.id, "user", "after", 500)
    await store.append(more)
    await memory.append(more)
    page, after = await counted(traced, lambda: store.page_messages("p", tail.id, 5, "forward"))
    assert page == await memory.page_messages("p", tail.id, 5, "forward")
    assert [e.id for e in page[0]] == ["new"]
    assert after.count <= first.count


async def test_a_commit_by_another_process_is_seen(pair: Any, tmp_path: Path) -> None:
    # Another store on the same file stands in for another process: its writer commits,
    # and the next page sees the new leaf, the new entries, and the deleted session.
    store, _, _ = pair
    leaf = await store.leaf("p")
    assert leaf is not None
    assert await store.page_messages("p", leaf, 5, "forward") == ([], False)
    async with await SqliteStore.open(tmp_path / "p.db") as other:
        added = [
            make_message("p", f"x{n}", f"x{n - 1}" if n else leaf, "user", "x", n) for n in range(3)
        ]
        await other.append_many(added)
        assert await store.page_messages("p", leaf, 5, "forward") == (added, False)
        await other.delete_session("p")
        with pytest.raises(EntryNotFoundError):
            await store.page_messages("p", leaf, 5, "forward")
        # The session again, a different tree under the same ids: nothing stale is used.
        again = chain("p", 4)
        await other.append_many(again)
        assert await store.page_messages("p", "t0", 5, "forward") == (again[1:], False)
        with pytest.raises(EntryNotFoundError):
            await store.page_messages("p", "t10", 5, "forward")


async def test_page_errors_come_in_the_reference_order_and_leave_no_stale_read(
    pair: Any, tmp_path: Path
) -> None:
    store, memory, traced = pair
    note = SessionEntry.model_validate(
        {
            "id": "note",
            "sessionId": "p",
            "parentId": "t59",
            "kind": "custom",
            "timestamp": "2025-01-01T00:00:00Z",
            "data": {"type": "app.note"},
        }
    )
    other = make_message("q", "q0", None, "user", "other session", 1)
    for target in (store, memory):
        await target.append(note)
        await target.append(other)
    failing: list[tuple[type[Exception], tuple[Any, ...], dict[str, Any]]] = [
        (EntryNotFoundError, ("p", "nope", 5), {}),
        (EntryNotFoundError, ("unknown", "t3", 5), {}),
        (InvalidInputError, ("p", "note", 5), {}),
        (EntryNotFoundError, ("p", "t3", 5), {"leaf_id": "missing"}),
        (EntryNotFoundError, ("p", "f0-3", 5), {"leaf_id": "f1-24"}),
    ]
    for error, args, kwargs in failing:
        for target in (memory, store, store):  # the second time from what the first kept
            with traced.counting() as run, pytest.raises(error):
                await target.page_messages(*args, **kwargs)
            assert run.count <= PAGE_STATEMENTS_MAX, run.statements
    with pytest.raises(SessionMismatchError):
        await store.page_messages("p", "t3", 5, leaf_id="q0")
    # A read transaction a failed page left open would keep answering from the old state.
    async with await SqliteStore.open(tmp_path / "p.db") as writer:
        await writer.append(make_message("p", "late", "t59", "user", "late", 900))
    assert await store.page_messages("p", "t59", 5, "forward", "late") == (
        [await store.get("late")],
        False,
    )


async def test_wide_pages_and_branches_of_many_forks_stay_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages wider than a point read, and branches over more pieces than one keeps: the
    # same answers, and at most a statement more per piece the page crosses (here every
    # fork's piece holds one message of it).
    entries = chain("w", 74, "m")
    parent = entries[-1].id
    for n in range(17):  # each fork starts a new segment
        entries.append(make_message("w", f"s{n}", parent, "user", "side", 900 + n))
        entries.append(make_message("w", f"k{n}", parent, "user", "kept", 950 + n))
        parent = entries[-1].id
    memory = MemoryStore()
    store, traced = await traced_store(monkeypatch, tmp_path / "w.db")
    async with store:
        for target in (store, memory):
            await target.append_many(entries)
        for cursor, limit in (("m0", 64), ("m0", 100), ("m3", 20), ("k3", 20)):
            for way in ("forward", "backward"):
                with traced.counting() as run:
                    got = await store.page_messages("w", cursor, limit, way)
                assert got == await memory.page_messages("w", cursor, limit, way)
                assert run.count <= len(got[0]) + PAGE_STATEMENTS_MAX, run.statements
                assert run.rows <= 2 * len(got[0]) + 2 * 40, run.rows


async def test_a_busy_answer_from_the_file_does_not_fail_a_page(pair: Any) -> None:
    store, memory, traced = pair
    await store.page_messages("p", "t3", 5)
    for _ in range(2):
        traced.fail_next(sqlite3.OperationalError("database is locked"))
        assert await store.page_messages("p", "t3", 5) == await memory.page_messages("p", "t3", 5)
        assert traced.failures_left == 0


async def test_the_same_page_on_a_ten_times_longer_branch_costs_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same page (20 messages before the leaf) on a branch ten times as long: the same
    # statements, rows, virtual machine work (within a tick or two) and Python calls.
    # (The test this replaced paged forward from the leaf: an empty page.)
    runs, calls, works = [], [], []
    for n in (60, 600):
        store, traced = await traced_store(monkeypatch, tmp_path / f"flat{n}.db")
        async with store:
            await store.append_many(chain("p", n))
            leaf = f"t{n - 1}"

            def page(store: SqliteStore = store, leaf: str = leaf) -> Awaitable[Any]:
                return recall_observational_memory_branch_page(
                    store, leaf, session_id="p", limit=20, direction="backward"
                )

            for _ in range(2):  # the branch's pieces kept after the first page
                assert len((await page()).messages) == 20
            _, run = await counted(traced, page)
            runs.append((run.count, run.rows))
            works.append(run.work)
            calls.append(await python_calls(page))
    assert runs[0] == runs[1] and runs[0][0] <= PAGE_STATEMENTS_MAX
    assert works[1] <= works[0] + 2, works
    assert calls[0] == calls[1] <= PAGE_CALLS_MAX


async def python_calls(call: Callable[[], Awaitable[object]]) -> int:
    """How many prism_om Python functions ``call()`` entered on this thread."""
    count = [0]

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and "prism_om" in frame.f_code.co_filename:
            count[0] += 1

    sys.setprofile(profile)
    try:
        await call()
    finally:
        sys.setprofile(None)
    return count[0]


async def test_a_page_with_a_bad_session_fails_before_reading(pair: Any) -> None:
    store, _, traced = pair
    with traced.counting() as run:
        with pytest.raises(InvalidSessionIdError):
            recall_observational_memory_branch_page_from_store(store, "../p", "t10", limit=20)
        with pytest.raises(InvalidSessionIdError):
            recall_observational_memory_branch_page(store, "t10", session_id="../p", limit=20)
        with pytest.raises(InvalidInputError, match="session_id"):
            recall_observational_memory_branch_page(store, "t10", limit=20)
    assert run.everything == []


async def test_a_page_reads_five_columns_a_row(pair: Any) -> None:
    # The rows statement read seven columns a row (the whole entry row); the session and
    # the kind are the page's own, so it reads five (id, timestamp, body, parent, data)
    # and builds the same entries.
    store, memory, traced = pair
    await store.page_messages("p", "t10", 20)
    with traced.counting() as run:
        for way in ("forward", "backward"):
            got = await store.page_messages("p", "t30", 20, way)
            assert got == await memory.page_messages("p", "t30", 20, way)
    rows = [s for s in run.statements if "ORDER BY depth" in s]
    assert rows, run.statements
    for statement in rows:
        columns = statement.split("SELECT", 1)[1].split("FROM", 1)[0]
        assert columns.count(",") + 1 == 5, statement


def plans(path: Path, run: Run) -> list[tuple[str, list[str], list[str]]]:
    """Each read statement of ``run`` (as traced, values inlined), its query plan steps
    and its program's opcodes, asked on a connection of the test's own."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        found = []
        for sql in run.statements:
            if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
            program = [row[1] for row in conn.execute(f"EXPLAIN {sql}")]
            found.append((sql, plan, program))
        return found
    finally:
        conn.close()


async def test_page_statements_search_indexes_only(pair: Any, tmp_path: Path) -> None:
    store, _, traced = pair
    with traced.counting() as run:
        for leaf, cursor in ((None, "t5"), (None, "f2-20"), ("f2-24", "f2-3"), ("f1-24", "t5")):
            for way in ("forward", "backward"):
                await store.page_messages("p", cursor, 20, way, leaf)
        # A turn's recent messages (the context, the reopen's tail), a page past a point read.
        await store.recent_messages("p", 20)
        await store.page_messages("p", "t0", 100, "forward", "f1-24")
    checked = plans(tmp_path / "p.db", run)
    assert checked
    for sql, plan, program in checked:
        scans = [s for s in plan if s.startswith("SCAN") and ("entries" in s or "SCAN e " in s)]
        assert scans == [], (sql, plan)
        # The rows come off the index in page order: nothing read in full to be sorted,
        # and no temporary table of the roles (``role IN (...)`` built one every run).
        assert not any("TEMP B-TREE" in step for step in plan), (sql, plan)
        if "ORDER BY depth" in sql:
            assert "OpenEphemeral" not in program, sql
    steps = [step for _, plan, _ in checked for step in plan]
    assert any("entries_segment_depth" in step for step in steps), checked


# -- recall ------------------------------------------------------------------------------


@pytest.fixture
async def story_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    story = Story()
    store, traced = await traced_store(monkeypatch, tmp_path / "s.db")
    async with store:
        await load_builder(store, story.builder)
        yield store, story, traced


async def recall(store: SqliteStore, memory_id: str, **kwargs: Any) -> Any:
    return await recall_observational_memory(store, memory_id, session_id="s1", **kwargs)


def listed(story: Story, memory_id: str, **kwargs: Any) -> Any:
    return recall_observational_memory(story.path, memory_id, **kwargs)


async def test_recall_is_one_statement(story_store: Any) -> None:
    # The memory's rows and the sources they cite come from one statement (it was two:
    # the rows, then the sources by id).
    store, story, traced = story_store
    await recall(store, story.o1)
    for memory_id, sources in ((story.o1, 2), (story.o3, 1), ("0" * 12, 0)):
        with traced.counting() as run:
            got = await recall(store, memory_id)
        assert got == listed(story, memory_id)
        assert run.count == 1, run.statements
        assert len(got.sources) == sources
    # A reflection: its rows, its supports', their sources.
    got, run = await counted(traced, lambda: recall(store, story.r1))
    assert got == listed(story, story.r1) and run.count <= 3, run.statements
    # A given leaf: its position first, then the branch's memory and sources.
    got, run = await counted(traced, lambda: recall(store, story.o1, leaf_id=story.m5.id))
    assert got == listed(story, story.o1) and run.count <= 3, run.statements


async def test_recall_statements_search_indexes(story_store: Any, tmp_path: Path) -> None:
    # Each table is searched by index; only the branch pieces and the source ids read
    # ahead (a few rows each) are scanned, and SQLite builds no automatic index per call.
    store, story, traced = story_store
    await recall(store, story.o1)
    with traced.counting() as run:
        await recall(store, story.o1)
    (checked,) = plans(tmp_path / "s.db", run)
    _, plan, _ = checked
    assert not [step for step in plan if "AUTOMATIC" in step], plan
    assert {step for step in plan if step.startswith("SCAN")} <= {"SCAN bp", "SCAN w"}, plan


async def test_withholding_a_reflection_reads_in_a_few_statements(story_store: Any) -> None:
    store, story, traced = story_store
    invalid = {story.o1}
    got, run = await counted(traced, lambda: recall(store, story.r1, invalidated_ids=invalid))
    assert got == listed(story, story.r1, invalidated_ids=invalid)
    assert got.to_json()["reason"] == "revoked"
    assert run.count <= 12, run.statements


async def test_a_memory_of_many_sources_is_recalled_in_a_few_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = BranchBuilder(session_id="s1", rng=random.Random(3))
    cited = [b.message("user", f"m{i}").id for i in range(70)]
    rec = b.observe(1, sources=cited)
    memory_id = rec.data["observations"][0]["id"] if rec.data else ""
    store, traced = await traced_store(monkeypatch, tmp_path / "s.db")
    async with store:
        await load_builder(store, b)
        got, run = await counted(traced, lambda: recall(store, memory_id))
        assert got == recall_observational_memory(b.path, memory_id)
        assert len(got.sources) == len(cited)
        assert run.count <= 3, run.statements


async def test_a_reflection_of_many_supports_is_recalled_in_a_few_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = BranchBuilder(session_id="s1", rng=random.Random(5))
    supports = []
    for i in range(18):
        message = b.message("user", f"m{i}")
        rec = b.observe(1, sources=[message.id])
        supports.append(rec.data["observations"][0]["id"] if rec.data else "")
    reflection_id = b.memory_id()
    b.custom(
        {
            "type": REFLECTIONS_RECORDED,
            "reflections": [{"id": reflection_id, "text": "all", "observationIds": supports}],
        }
    )
    store, traced = await traced_store(monkeypatch, tmp_path / "s.db")
    async with store:
        await load_builder(store, b)
        got, run = await counted(traced, lambda: recall(store, reflection_id))
        assert got == recall_observational_memory(b.path, reflection_id)
        assert len(got.supporting_observations) == len(supports)
        assert run.count <= 3, run.statements


async def test_a_busy_answer_from_the_file_does_not_fail_a_recall(story_store: Any) -> None:
    store, story, traced = story_store
    await recall(store, story.o1)
    for _ in range(2):
        traced.fail_next(sqlite3.OperationalError("database is locked"))
        assert await recall(store, story.o1) == listed(story, story.o1)
        assert traced.failures_left == 0


async def test_a_failing_loop_connection_leaves_the_read_to_the_reader(story_store: Any) -> None:
    # Private hook kept: which connection a point read runs on has no public face, and
    # "an error there is redone on the reader, once" is a property of that connection.
    store, story, _ = story_store
    await recall(store, story.o1)

    class Broken:
        statements = 0
        closed = False
        in_transaction = False

        def execute(self, sql: str, params: Any = ()) -> Any:
            self.statements += 1
            raise sqlite3.DatabaseError("database disk image is malformed")

        def close(self) -> None:
            self.closed = True

    broken = Broken()
    store._point.raw = broken
    assert await recall(store, story.o1) == listed(story, story.o1)
    assert broken.statements == 1 and broken.closed
    assert await recall(store, story.o1) == listed(story, story.o1)
    assert broken.statements == 1  # no second try on that connection


async def test_close_closes_every_connection_and_refuses_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    story = Story()
    store, traced = await traced_store(monkeypatch, tmp_path / "s.db")
    await load_builder(store, story.builder)
    await recall(store, story.o1)
    await store.entries("s1")
    await store.close()
    assert traced.connections > 0 and traced.open_connections == 0
    with traced.counting() as run:
        with pytest.raises(StoreClosedError):
            await recall(store, story.o1)
        with pytest.raises(StoreClosedError):
            await recall_observational_memory_branch_page(
                store, story.m1.id, session_id="s1", limit=2
            )
    assert run.everything == []


async def test_a_read_only_store_recalls_in_one_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    story = Story()
    async with await SqliteStore.open(tmp_path / "s.db") as store:
        await load_builder(store, story.builder)
    with statements(monkeypatch) as traced:
        store = await SqliteStore.open(tmp_path / "s.db", read_only=True)
    async with store:
        assert traced.open_connections == 1  # its one connection (a probe opened and closed)
        got, run = await counted(traced, lambda: recall(store, story.o1))
        assert got == listed(story, story.o1)
        # Its one connection (no loop connection here) runs the same one statement.
        assert run.count == 1, run.statements


# -- the turn's other reads --------------------------------------------------------------


async def read_costs(path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> dict[str, int]:
    """Statements of each of a turn's reads on a store of ``size`` entries."""
    data = build_dataset(size)
    store, traced = await traced_store(monkeypatch, path)
    async with store:
        await store.append_many(data.entries)
        leaf = data.last_id
        memory_id, _ = data.middle_memory_id()
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "leaf": lambda: store.leaf(SESSION_ID),
            "recent_messages": lambda: store.recent_messages(SESSION_ID, 20),
            "ledger": lambda: store.ledger(SESSION_ID),
            "live_ledger": lambda: store.live_ledger(SESSION_ID),
            "is_on_branch": lambda: store.is_on_branch(SESSION_ID, data.entries[3].id, leaf),
            "memory_head": lambda: store.memory_head(SESSION_ID),
            "last_compaction": lambda: store.last_compaction(SESSION_ID),
            "recall": lambda: recall_observational_memory(store, memory_id, session_id=SESSION_ID),
            "page": lambda: store.page_messages(SESSION_ID, data.middle_message_id(), 20),
            "context_blocks": lambda: build_observational_memory_context_blocks(
                store, session_id=SESSION_ID
            ),
        }
        costs = {}
        for name, call in calls.items():
            _, run = await counted(traced, call)
            costs[name] = run.count
        return costs


async def test_a_turns_reads_run_as_many_statements_on_a_session_four_times_longer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = await read_costs(tmp_path / "short.db", monkeypatch, 1200)
    long = await read_costs(tmp_path / "long.db", monkeypatch, 4800)
    # A read that walked the session (an entry, a record at a time) would run hundreds
    # more; the context's reads differ by a statement or two with what the session holds.
    assert all(long[name] <= short[name] + 2 <= 22 for name in short), (short, long)
    assert {n: c for n, c in short.items() if n != "context_blocks"} == {
        n: c for n, c in long.items() if n != "context_blocks"
    }


async def test_whole_branch_reads_run_few_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = build_dataset(1200)
    store, traced = await traced_store(monkeypatch, tmp_path / "s.db")
    async with store:
        await store.append_many(data.entries)
        ids = [e.id for e in data.entries[:700]]
        calls: list[tuple[Callable[[], Awaitable[Any]], int]] = [
            (lambda: store.entries(SESSION_ID), 2),
            (lambda: store.entries_after(SESSION_ID, data.middle_message_id()), 3),
            (lambda: store.get_many(ids), 2),  # 500 ids a statement
        ]
        for call, most in calls:
            got, run = await counted(traced, call)
            assert run.count <= most, run.statements
            assert run.rows <= len(got) + 2, (run.rows, len(got))


async def test_drive_refuses_a_coroutine_that_would_wait() -> None:
    # Private module kept: ``drive`` runs a read's coroutine to its end on the reader's
    # thread, and must refuse one that would wait there; no public call can make it wait.
    import asyncio

    from prism_om.stores.sqlite.worker_thread import drive

    async def answers() -> int:
        return 7

    cleaned: list[bool] = []

    async def waits() -> int:
        try:
            await asyncio.sleep(0.01)
        finally:
            cleaned.append(True)  # closed, so its rollback path runs
        return 1

    assert drive(answers()) == 7
    with pytest.raises(RuntimeError, match="tried to wait"):
        drive(waits())
    assert cleaned == [True]
