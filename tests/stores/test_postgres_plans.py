"""Indexed reads on PostgreSQL: every read query of the store, as transpiled from the
SQLite adapter's SQL, plans without a ``Seq Scan`` of the entries or fold tables.

The tables are filled straight with SQL (fast, and enough rows that a sequential scan
would be the planner's choice for an unindexed predicate), ``ANALYZE`` gives the planner
real statistics, and ``EXPLAIN (FORMAT JSON)`` runs with the planner's defaults (never
``enable_seqscan=off``). The negative control drops one index and sees the check fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql
from psycopg.types.numeric import Int8Dumper

from prism_om.stores import open_store
from prism_om.stores.postgres import split_postgres_url
from prism_om.stores.postgres.connection import _bind
from prism_om.stores.sql import statements as q

WATCHED = {
    "entries",
    "om_observations",
    "om_observation_sources",
    "om_reflections",
    "om_drops",
    "om_markers",
    "om_scope_records",
    "om_supersessions",
}
SESSIONS = 200
ROOT_LEN = 400  # entries on each session's root segment
FORK_AT = 300  # each session's second segment forks off its root here...
FORK_LEN = 100  # ...and holds this many entries (the session's leaf is its last)

FILL = [
    # Root segments 1..S, fork segments S+1..2S starting at FORK_AT under their root.
    f"""INSERT INTO sessions (session_id, seq, root_id, leaf_id, created_at)
    SELECT 's' || s, s, 'e' || ((s - 1) * {ROOT_LEN + FORK_LEN} + 1),
           'e' || (s * {ROOT_LEN + FORK_LEN}), '2026-01-01T00:00:00.000Z'
    FROM generate_series(1, {SESSIONS}) s""",
    f"""INSERT INTO segments (segment_id, session_id, parent_segment_id, start_depth)
    SELECT s, 's' || s, NULL, 0 FROM generate_series(1, {SESSIONS}) s
    UNION ALL
    SELECT {SESSIONS} + s, 's' || s, s, {FORK_AT} FROM generate_series(1, {SESSIONS}) s""",
    # Entry n of session s: seq (s-1)*(ROOT+FORK)+n; the first ROOT_LEN on the root.
    f"""INSERT INTO entries (seq, id, session_id, parent_id, kind, role, custom_type,
        timestamp, depth, segment_id, tokens, token_encoding, path_tokens, body)
    SELECT seq, 'e' || seq, 's' || s, NULL,
           CASE WHEN n % 10 = 0 THEN 'custom' ELSE 'message' END,
           CASE WHEN n % 10 = 0 THEN NULL WHEN n % 2 = 0 THEN 'user' ELSE 'assistant' END,
           NULL, '2026-01-01T00:00:00.000Z',
           CASE WHEN n <= {ROOT_LEN} THEN n - 1 ELSE {FORK_AT} + n - {ROOT_LEN} - 1 END,
           CASE WHEN n <= {ROOT_LEN} THEN s ELSE {SESSIONS} + s END,
           5, 'x', 5 * n, '{{"type": "message"}}'
    FROM generate_series(1, {SESSIONS}) s, generate_series(1, {ROOT_LEN + FORK_LEN}) n,
         LATERAL (SELECT (s - 1) * {ROOT_LEN + FORK_LEN} + n AS seq) k""",
    """INSERT INTO om_observations
    SELECT seq, 0, 'obs-' || seq, id, segment_id, depth, timestamp, '{}'
    FROM entries WHERE seq % 5 = 0""",
    """INSERT INTO om_observation_sources
    SELECT seq, 0, 'e' || (seq - 1) FROM entries WHERE seq % 5 = 0""",
    """INSERT INTO om_reflections
    SELECT seq, 0, 'ref-' || seq, id, segment_id, depth, timestamp, '{}'
    FROM entries WHERE seq % 7 = 0""",
    """INSERT INTO om_drops SELECT seq, 0, 'obs-' || (seq - 5), segment_id, depth
    FROM entries WHERE seq % 11 = 0 AND seq > 5""",
    """INSERT INTO om_markers SELECT seq, id, 'compaction', NULL, segment_id, depth
    FROM entries WHERE seq % 13 = 0""",
    """INSERT INTO om_scope_records SELECT seq, 'om.scope.shared', segment_id, depth
    FROM entries WHERE seq % 17 = 0""",
    """INSERT INTO om_supersessions SELECT seq, 0, 'ref-' || (seq - 7), 'ref-' || seq,
    segment_id, depth FROM entries WHERE seq % 14 = 0""",
    """INSERT INTO session_summary SELECT session_id, 500, 450, 2, NULL FROM sessions""",
    "ANALYZE",
]


def read_queries() -> dict[str, tuple[str, Any]]:
    """Each read query of the store with realistic bindings (session 7, on its fork)."""
    s = 7
    base = (s - 1) * (ROOT_LEN + FORK_LEN)
    leaf_segment, leaf_depth = SESSIONS + s, FORK_AT + FORK_LEN - 1
    leaf_id = f"e{base + ROOT_LEN + FORK_LEN}"
    on_root = f"e{base + 120}"  # depth 119 on the root segment, below the fork
    branch = {
        "leaf_segment": leaf_segment,
        "leaf_depth": leaf_depth,
        "min_depth": 0,
        "max_depth": leaf_depth,
        "entry_id": on_root,
        "encoding": "x",
    }
    window = {**branch, "min_depth": 100, "max_depth": 160}
    roles = q.ELIGIBLE_ROLES
    ids = [f"e{base + n}" for n in (3, 50, 333)]
    memory_ids = [f"obs-{base + 5 * k}" for k in (2, 40, 90)]
    three = ", ".join("?" * len(memory_ids))
    marks = ", ".join("?" * len(ids))
    queries: dict[str, tuple[str, Any]] = {
        "branch entries": (q.BRANCH_ENTRIES_SQL, branch),
        "branch entries, a window": (q.BRANCH_ENTRIES_SQL, window),
        "branch pieces": (q.BRANCH_PIECES_SQL, branch),
        "entry on branch": (q.DEPTH_ON_BRANCH_SQL, branch),
        "cursor on branch": (q.CURSOR_ON_BRANCH_SQL, branch),
        "branch tokens": (q.BRANCH_TOKENS_SQL, branch),
        "scope records": (q.SCOPE_RECORDS_SQL, branch),
        "recent messages": (q.RECENT_MESSAGES_SQL, (leaf_segment, FORK_AT, leaf_depth, *roles, 20)),
        "page forward": (q.PAGE_FORWARD_SQL, (s, 120, FORK_AT - 1, *roles, 21)),
        "page backward": (q.RECENT_MESSAGES_SQL, (s, 0, 118, *roles, 21)),
        "memory subset": (
            q.MEMORY_SUBSET_SQL.format(marks=three),
            [leaf_segment, leaf_depth, *memory_ids, *memory_ids, *memory_ids],
        ),
        "memory subset at leaf": (
            q.MEMORY_SUBSET_AT_LEAF_SQL.format(marks=three),
            [f"s{s}", *memory_ids, *memory_ids, *memory_ids],
        ),
        "memory subset with supersessions": (
            q.MEMORY_SUBSET_WITH_SUPERSESSIONS_SQL.format(marks=three),
            [leaf_segment, leaf_depth, *(memory_ids * 4)],
        ),
        "memory subset with supersessions at leaf": (
            q.MEMORY_SUBSET_WITH_SUPERSESSIONS_AT_LEAF_SQL.format(marks=three),
            [f"s{s}", *(memory_ids * 4)],
        ),
        "supersessions": (q.SUPERSESSIONS_SQL, branch),
        "supersessions, a window": (q.SUPERSESSIONS_SQL, window),
        "last compaction": (q.LAST_COMPACTION_SQL, (s, 0, FORK_AT - 1)),
        "memory head": (q.MEMORY_HEAD_SQL, (leaf_segment, FORK_AT, leaf_depth)),
        "bodies by id": (q.BODIES_BY_ID_SQL.format(marks=marks), ids),
        "entries by id": (q.ENTRIES_BY_ID_SQL.format(marks=marks), ids),
        "entries by seq": (
            q.ENTRIES_BY_SEQ_SQL.format(marks=marks),
            [base + n for n in (3, 50, 333)],
        ),
        "parents": (q.PARENTS_SQL.format(marks=marks), ids),
        "position": (q.POSITION_SQL, (on_root,)),
        "leaf by session": (q.LEAF_BY_SESSION_SQL, (f"s{s}",)),
        "leaf by id": (q.LEAF_BY_ID_SQL, (leaf_id,)),
        "leaves": (q.LEAVES_SQL, (f"s{s}",)),
        "counts (summaries)": (q.SUMMARIES_SQL, ()),
        "state": (q.STATE_SQL, (f"s{s}",)),
        "entry by id": ("SELECT id, CAST(body AS BLOB) FROM entries WHERE id = ?", (on_root,)),
        "session entries": (
            "SELECT id, CAST(body AS BLOB) FROM entries WHERE session_id = ? ORDER BY seq",
            (f"s{s}",),
        ),
        "known ids": (f"SELECT id FROM entries WHERE id IN ({marks})", ids),
        "fold timestamps": (f"SELECT id, timestamp FROM entries WHERE id IN ({marks})", ids),
    }
    for name, text in q.LEDGER_SQL.items():
        queries[f"ledger {name}"] = (text, branch)
        queries[f"ledger {name}, a window"] = (text, window)
    for table in ("om_observations", "om_reflections", "om_drops", "om_supersessions"):
        queries[f"memory by id in {table}"] = (
            q.MEMORY_BY_ID_SQL.format(table=table, marks=three),
            memory_ids,
        )
    return queries


def seq_scans(plan: Any) -> list[str]:
    """Tables of the watched set that a JSON plan reads with a ``Seq Scan``."""
    found: list[str] = []
    if isinstance(plan, dict):
        if plan.get("Node Type") == "Seq Scan" and plan.get("Relation Name") in WATCHED:
            found.append(str(plan["Relation Name"]))
        for value in plan.values():
            found.extend(seq_scans(value))
    elif isinstance(plan, list):
        for value in plan:
            found.extend(seq_scans(value))
    return found


def scanned(conn: psycopg.Connection[Any], names: set[str] | None = None) -> dict[str, list[str]]:
    """Each read query whose plan seq-scans a watched table, with those tables."""
    bad: dict[str, list[str]] = {}
    for name, (text, params) in read_queries().items():
        if names is not None and name not in names:
            continue
        pg_text, bound = _bind(text, params)
        row = conn.execute(f"EXPLAIN (FORMAT JSON) {pg_text}", bound).fetchone()
        assert row is not None
        tables = seq_scans(row[0])
        if tables:
            bad[name] = tables
    return bad


@pytest.fixture
def filled(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    async def create() -> None:
        async with await open_store(postgres_url):
            pass

    import asyncio

    asyncio.run(create())
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.adapters.register_dumper(int, Int8Dumper)
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        for statement in FILL:
            conn.execute(statement)  # type: ignore[arg-type]
        # Planner defaults, whatever the server's configuration says.
        conn.execute("RESET enable_seqscan")
        yield conn


def test_every_read_query_is_an_index_read(filled: psycopg.Connection[Any]) -> None:
    assert filled.execute("SELECT count(*) FROM entries").fetchone() == (SESSIONS * 500,)
    assert len(read_queries()) >= 35
    assert scanned(filled) == {}


def test_without_its_index_a_read_seq_scans_and_the_check_fails(
    filled: psycopg.Connection[Any],
) -> None:
    # The negative control: the same check, one index fewer.
    filled.execute("DROP INDEX entries_segment_depth")
    filled.execute("ANALYZE entries")
    bad = scanned(filled)
    assert "entries" in bad.get("recent messages", []), bad
    assert "entries" in bad.get("branch entries, a window", []), bad


LONG_SESSION = 50_000  # one session, one branch: the bench's shape at a test's size


def test_a_page_of_one_long_session_reads_the_index_in_order(postgres_url: str) -> None:
    """The bench's shape: one session of many entries on one branch, appended by the
    store in batches and read at once (no ANALYZE of ours, autovacuum not yet by). Without
    statistics the planner took the page's depth range for a few rows and planned a
    Bitmap Heap Scan of the whole rest of the branch plus a Sort: a page grew with the
    session. The store analyzes the tables it has filled, so the page is an Index Scan of
    ``entries_segment_depth`` in depth order that stops after ``limit`` rows."""
    import asyncio

    from bench.data import SESSION_ID, build_dataset

    dataset = build_dataset(LONG_SESSION)

    async def build() -> None:
        async with await open_store(postgres_url) as store:
            for i in range(0, LONG_SESSION, 1000):
                await store.append_many(dataset.entries[i : i + 1000])

    asyncio.run(build())
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.adapters.register_dumper(int, Int8Dumper)
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        row = conn.execute(
            "SELECT e.segment_id, e.depth FROM sessions s JOIN entries e ON e.id = s.leaf_id"
            " WHERE s.session_id = %s",
            (SESSION_ID,),
        ).fetchone()
        assert row is not None
        segment_id, leaf_depth = row
        cursor = conn.execute(
            "SELECT depth FROM entries WHERE id = %s", (dataset.middle_message_id(),)
        ).fetchone()
        assert cursor is not None
        roles = q.ELIGIBLE_ROLES
        for text, params in (
            (q.PAGE_FORWARD_SQL, (segment_id, cursor[0] + 1, leaf_depth, *roles, 21)),
            (q.RECENT_MESSAGES_SQL, (segment_id, 0, leaf_depth, *roles, 21)),
        ):
            pg_text, bound = _bind(text, params)
            plan = conn.execute(f"EXPLAIN (FORMAT JSON) {pg_text}", bound).fetchone()
            assert plan is not None
            top = plan[0][0]["Plan"]
            assert top["Node Type"] == "Limit", top
            scan = top["Plans"][0]
            assert scan["Node Type"] == "Index Scan", scan
            assert scan["Index Name"] == "entries_segment_depth", scan
