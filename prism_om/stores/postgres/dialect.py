"""The SQLite adapter's SQL, transpiled to PostgreSQL by sqlglot: one source, two engines.

``schema.sql`` and the queries of ``stores/sql/statements.py`` (and the few inline ones of the
SQLite modules) are the single source. Each is parsed as SQLite and written as PostgreSQL
with ``unsupported_level=RAISE``, once per distinct text (cached), so a construct sqlglot
cannot carry over fails loudly instead of running with other semantics. The rewrites
below are the whole dialect difference; each says why it is needed.
"""

from __future__ import annotations

import functools
import re
from typing import cast

import sqlglot
from sqlglot import exp

from .._schema import load_schema

__all__ = ["IDENTITY_COLUMNS", "numbered_to_named", "postgres_schema", "postgres_sql"]

# Counters SQLite's adapter assigns as max()+1 under its one-writer lock. On a server,
# max()+1 across concurrent writers means key violations or a global lock, so these are
# identity columns there: each writer draws its own values from the column's sequence.
IDENTITY_COLUMNS = {("sessions", "seq"), ("entries", "seq"), ("segments", "segment_id")}

_NUMBERED = re.compile(r"\?(\d*)")


def numbered_to_named(sql: str) -> tuple[str, int]:
    """Rewrite SQLite's ``?NNN`` / ``?`` placeholders as ``:pNNN`` (sqlglot parses no ``?1``).

    SQLite binds ``?NNN`` to parameter NNN and a bare ``?`` to one past the largest index
    used so far; the same numbering is kept here. Returns the text and the highest index.
    """
    highest = 0

    def name(match: re.Match[str]) -> str:
        nonlocal highest
        index = int(match.group(1)) if match.group(1) else highest + 1
        highest = max(highest, index)
        return f":p{index}"

    return _NUMBERED.sub(name, sql), highest


def _rewrite_query(node: exp.Expression) -> exp.Expression:
    # The one statement the engines spell differently: sqlglot passes SQLite's
    # INSERT OR IGNORE through unchanged, and PostgreSQL's twin is ON CONFLICT DO NOTHING.
    if isinstance(node, exp.Insert) and node.args.get("alternative") == "IGNORE":
        node.set("alternative", None)
        node.set("conflict", exp.OnConflict(action=exp.var("DO NOTHING")))
    # SQLite's adapter casts body to BLOB so sqlite3 hands back bytes for the JSON parser;
    # PostgreSQL's text-to-bytea cast would read backslashes as escapes, so text stays text.
    if isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.VARBINARY, "blob"):
        return cast(exp.Expression, node.this)
    # SQLite sorts NULLs first, so sqlglot spells that out for PostgreSQL; every sorted
    # column is NOT NULL, and the explicit NULLS clause would keep PostgreSQL from reading
    # an index backwards for ``ORDER BY depth DESC`` (and is invalid in ON CONFLICT).
    if isinstance(node, exp.Ordered):
        node.set("nulls_first", bool(node.args.get("desc")))
    # A branch read joins a table to the few pieces of the recursive branch_path CTE.
    # PostgreSQL estimates a recursive CTE at ten times its recursive term (~31 pieces
    # where a branch has a handful), so for a table of a few thousand rows it prefers one
    # hash join over a Seq Scan of the whole table (every session's rows) to ~31 index
    # probes. Spelled as a one-value range, the join is neither hashable nor mergeable:
    # the plan is a nested loop searching the (segment_id, depth) index once per piece,
    # as SQLite's CROSS JOIN asks (tests/stores/test_postgres_plans.py checks the plans).
    if isinstance(node, exp.EQ):
        piece = _branch_piece_column(node.expression)
        other = node.this
        if piece is None:
            piece, other = _branch_piece_column(node.this), node.expression
        if (
            piece is not None
            and isinstance(other, exp.Column)
            and other.name == "segment_id"
            and other.table != "bp"
        ):
            return exp.Between(this=other, low=piece.copy(), high=piece.copy())
    return node


def _branch_piece_column(node: exp.Expression) -> exp.Column | None:
    """``bp.segment_id``: a piece of the branch_path CTE in a branch read's join."""
    if isinstance(node, exp.Column) and node.table == "bp" and node.name == "segment_id":
        return node
    return None


@functools.lru_cache(maxsize=2048)
def postgres_sql(sql: str) -> str:
    """One SQLite query of the adapter as PostgreSQL (psycopg ``%s`` / ``%(name)s`` style)."""
    if re.search(r"\?\d", sql):
        sql, _ = numbered_to_named(sql)
    tree = sqlglot.parse_one(sql, read="sqlite")
    tree = tree.transform(_rewrite_query)
    return tree.sql(dialect="postgres", unsupported_level=sqlglot.ErrorLevel.RAISE)


def _rewrite_schema(node: exp.Expression) -> exp.Expression:
    node = _rewrite_query(node)
    # SQLite's INTEGER is 64-bit; PostgreSQL's INT is not.
    if isinstance(node, exp.DataType) and node.this == exp.DataType.Type.INT:
        return exp.DataType.build("BIGINT")
    # The REFERENCES clauses document relations: SQLite leaves them unenforced and the
    # adapter keeps them itself (schema.sql); enforcing them here would cost a lookup per
    # row that SQLite does not pay, with no rule the adapter does not already check.
    if isinstance(node, exp.ColumnConstraint) and isinstance(node.kind, exp.Reference):
        return None  # type: ignore[return-value]
    if isinstance(node, exp.ForeignKey):
        return None  # type: ignore[return-value]
    # WITHOUT ROWID is SQLite's storage layout (the key is the table); PostgreSQL keeps
    # every table as a heap with its key as an index, whatever the clause says.
    if isinstance(node, exp.WithoutRowidProperty):
        return None  # type: ignore[return-value]
    return node


def _identity(statement: exp.Expression) -> exp.Expression:
    if not isinstance(statement, exp.Create) or statement.kind != "TABLE":
        return statement
    table = statement.this.this.name
    for column in statement.find_all(exp.ColumnDef):
        if (table, column.name) in IDENTITY_COLUMNS:
            column.append(
                "constraints",
                exp.ColumnConstraint(kind=exp.GeneratedAsIdentityColumnConstraint(this=False)),
            )
    return statement


@functools.cache
def postgres_schema() -> tuple[str, ...]:
    """``schema.sql`` as PostgreSQL statements, with the additions above."""
    out = []
    for statement in load_schema().statements:
        tree = sqlglot.parse_one(statement, read="sqlite").transform(_rewrite_schema)
        tree = _identity(tree)
        out.append(tree.sql(dialect="postgres", unsupported_level=sqlglot.ErrorLevel.RAISE))
    return tuple(out)
