"""Find and split ``schema.sql``, the one source of the relational schema.

A wheel carries the file as ``prism_om/schema.sql`` (hatch force-include); a source
checkout or an editable install has it at the repository root, next to the package.
"""

from __future__ import annotations

import functools
import sqlite3
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import StoreError

__all__ = [
    "APPLICATION_ID",
    "LIVE_POOL_SINCE_VERSION",
    "SCHEMA_VERSION",
    "SEARCH_INDEXED_SINCE_VERSION",
    "SEARCH_INDEX_SINCE_VERSION",
    "SUPERSESSIONS_SINCE_VERSION",
    "Schema",
    "load_schema",
]

# The version of schema.sql, kept in PRAGMA user_version; bump it with every change there,
# and add the step from the version before to MIGRATIONS (stores/sqlite/connect.py).
SCHEMA_VERSION = 6
# The first version with the om_supersessions fold table: a store of an older version
# opened read-only (so not migrated) holds no supersession, and reads skip the table.
SUPERSESSIONS_SINCE_VERSION = 3
# The first version with the om_live pool (stores/sql/live_pool.py): an older store
# opened read-only reads the live ledger from the fold tables instead.
LIVE_POOL_SINCE_VERSION = 4
# The first version with the search_terms index (stores/sql/search_index.py): an older
# store opened read-only is searched by a scan of the branch instead.
SEARCH_INDEX_SINCE_VERSION = 5
# The first version whose messages are indexed by the first search that reaches them
# (search_indexed), not in the append: a version-5 store holds every message's rows.
SEARCH_INDEXED_SINCE_VERSION = 6
# PRAGMA application_id of a prism_om file: "PrOm", so foreign SQLite files are refused.
APPLICATION_ID = 0x50724F6D


@dataclass(frozen=True)
class Schema:
    """The schema text, where it was read from, and its statements in file order."""

    text: str
    origin: str
    statements: tuple[str, ...]


@functools.cache
def load_schema() -> Schema:
    """Read ``schema.sql`` from the installed package, else from the source checkout."""
    packaged = resources.files("prism_om").joinpath("schema.sql")
    if packaged.is_file():
        text, origin = packaged.read_text(encoding="utf-8"), str(packaged)
    else:
        checkout = Path(__file__).resolve().parents[2] / "schema.sql"
        if not checkout.is_file():
            raise StoreError(
                "schema.sql is missing: it is neither package data (prism_om/schema.sql) "
                f"nor at {checkout}; reinstall prism-om"
            )
        text, origin = checkout.read_text(encoding="utf-8"), str(checkout)
    return Schema(text, origin, split_statements(text))


def split_statements(text: str) -> tuple[str, ...]:
    """Split SQL text into complete statements (comments and blank lines dropped)."""
    statements: list[str] = []
    pending: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("--")):
            continue
        pending.append(line)
        candidate = "\n".join(pending)
        # complete_statement understands quotes and comments, so a ';' inside them is safe.
        if sqlite3.complete_statement(candidate):
            statements.append(candidate.strip())
            pending = []
    if "\n".join(pending).strip():
        raise StoreError(f"schema.sql ends with an incomplete statement: {pending[0]!r}")
    return tuple(statements)
