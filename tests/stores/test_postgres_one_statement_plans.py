"""The PostgreSQL-only statements (``stores/postgres/reads.py``) plan as index reads.

The same tables and check as ``test_postgres_plans`` (its fill, ``ANALYZE``, planner
defaults, no ``Seq Scan`` of the entries or fold tables), for each single-statement page
and recall, both as planned for its values and as the generic plan a prepared statement
(psycopg prepares a statement run five times on a connection) may switch to.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql
from stores.test_postgres_plans import FORK_AT, FORK_LEN, ROOT_LEN, SESSIONS, filled, seq_scans

from prism_om.stores.postgres import reads

__all__ = ["filled"]

S = 7
BASE = (S - 1) * (ROOT_LEN + FORK_LEN)
LEAF = f"e{BASE + ROOT_LEN + FORK_LEN}"  # the session's leaf, on its fork
ON_ROOT = f"e{BASE + 120}"  # depth 119 on the root segment, below the fork
MESSAGE = f"e{BASE + 122}"  # a user message there
MEMORY_IDS = [f"obs-{BASE + 5 * k}" for k in (2, 40, 90)]
TYPES = {"session_id": "text", "leaf_id": "text", "cursor": "text", "want": "bigint"}
TYPES |= {"id": "text", "ids": "text[]"}


def statements() -> dict[str, tuple[str, dict[str, Any]]]:
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for (way, leaf), text in reads.PAGE_SQL.items():
        params = {"session_id": f"s{S}", "cursor": MESSAGE, "want": 21}
        params["leaf_id"] = None if leaf == "session" else LEAF
        found[f"page {way} at the {leaf} leaf"] = (text, params)
    for (count, leaf), text in reads.MEMORY_SUBSET_SQL.items():
        params = {"session_id": f"s{S}", "id": MEMORY_IDS[0], "ids": MEMORY_IDS}
        params["leaf_id"] = None if leaf == "session" else LEAF
        found[f"memory subset, {count} id(s), at the {leaf} leaf"] = (text, params)
    found["bodies by ids"] = (reads.BODIES_BY_IDS_SQL, {"ids": [ON_ROOT, LEAF]})
    found["body by id"] = (reads.BODY_BY_ID_SQL, {"id": ON_ROOT})
    return found


def positional(text: str, params: dict[str, Any]) -> tuple[str, list[str], list[Any]]:
    """The statement with $n placeholders, its parameter types and values, in order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1) or ("ids" if "ANY" in text else "id")
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    out = re.sub(r"%\((\w+)\)s|%s", number, text)
    return out, [TYPES[n] for n in names], [params[n] for n in names]


def plans(conn: psycopg.Connection[Any], text: str, params: dict[str, Any]) -> list[Any]:
    """The custom plan for these values, then the generic plan of the prepared statement."""
    out, types, values = positional(text, params)
    # EXPLAIN EXECUTE takes no bind parameters: the values go in as literals.
    args = pgsql.SQL(", ").join(
        pgsql.SQL("{}::{}").format(pgsql.Literal(v), pgsql.SQL(t))  # type: ignore[arg-type]
        for v, t in zip(values, types, strict=True)
    )
    found = []
    conn.prepare_threshold = None  # psycopg's own prepared statements stay out of the way
    conn.execute(f"PREPARE q ({', '.join(types)}) AS {out}")  # type: ignore[arg-type]
    for mode in ("force_custom_plan", "force_generic_plan"):
        conn.execute(f"SET plan_cache_mode = {mode}")  # type: ignore[arg-type]
        query = pgsql.SQL("EXPLAIN (FORMAT JSON) EXECUTE q ({})").format(args)
        row = conn.execute(query).fetchone()
        assert row is not None
        found.append(row[0])
    conn.execute("RESET plan_cache_mode")
    conn.execute("DEALLOCATE q")
    return found


def test_the_one_statement_reads_are_index_reads(filled: psycopg.Connection[Any]) -> None:
    assert SESSIONS * (ROOT_LEN + FORK_LEN) > 50_000 and FORK_AT < ROOT_LEN
    checked = statements()
    # 4 pages, 4 memory subsets (one/many ids, session/given leaf), 2 lookups by id
    assert len(checked) == 10
    bad = {}
    for name, (text, params) in checked.items():
        for mode, plan in zip(("custom", "generic"), plans(filled, text, params), strict=True):
            if seq_scans(plan):
                bad[f"{name} ({mode})"] = seq_scans(plan)
    assert bad == {}


def test_without_its_index_a_page_seq_scans_and_the_check_fails(
    filled: psycopg.Connection[Any],
) -> None:
    filled.execute("DROP INDEX entries_segment_depth")
    filled.execute("ANALYZE entries")
    text, params = statements()["page forward at the session leaf"]
    custom, generic = plans(filled, text, params)
    assert "entries" in seq_scans(custom) + seq_scans(generic)


@pytest.mark.parametrize("way", ["forward", "backward"])
def test_a_page_reads_each_piece_off_the_index_and_stops(
    filled: psycopg.Connection[Any], way: str
) -> None:
    """Each branch piece is an Index Scan of (segment_id, depth) under a Limit: a page
    costs the page, not the rest of the branch (generic plan included)."""
    text, params = statements()[f"page {way} at the session leaf"]
    for plan in plans(filled, text, params):
        assert "entries_segment_depth" in _limited_index_scans(plan), plan


def _limited_index_scans(plan: Any) -> list[str]:
    """Indexes read by an Index Scan right under a Limit node."""
    found: list[str] = []
    if isinstance(plan, dict):
        if plan.get("Node Type") == "Limit":
            child = plan.get("Plans", [{}])[0]
            if child.get("Node Type") == "Index Scan":
                found.append(str(child.get("Index Name")))
        for value in plan.values():
            found.extend(_limited_index_scans(value))
    elif isinstance(plan, list):
        for value in plan:
            found.extend(_limited_index_scans(value))
    return found
