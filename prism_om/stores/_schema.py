"""Find and split ``schema.sql``, the one source of the relational schema, and word the
errors of a store at another schema version (``StoreVersionError``) for both SQL adapters.

A wheel carries the file as ``prism_om/schema.sql`` (hatch force-include); a source
checkout or an editable install has it at the repository root, next to the package.
"""

from __future__ import annotations

import functools
import sqlite3
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import StoreError, StoreVersionError

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "Schema",
    "load_schema",
    "newer_version",
    "no_migration",
    "older_read_only",
]

# The version of schema.sql, kept in PRAGMA user_version; bump it with every change there,
# and add the step from the version before to MIGRATIONS (stores/sqlite/connect.py).
SCHEMA_VERSION = 8
# PRAGMA application_id of a prism_om file: "PrOm", so foreign SQLite files are refused.
APPLICATION_ID = 0x50724F6D


# -- the version errors, one wording for SQLite and PostgreSQL --------------------------


def newer_version(url: str, version: int) -> StoreVersionError:
    """A store written by a newer prism_om: this one cannot read or migrate it."""
    return StoreVersionError(
        f"{url} has schema version {version}, newer than version {SCHEMA_VERSION} that "
        "this prism_om supports: upgrade prism-om to open it",
        version=version,
        supported=SCHEMA_VERSION,
        url=url,
    )


def no_migration(url: str, version: int) -> StoreVersionError:
    """An older store with a gap in the migrations to this version."""
    return StoreVersionError(
        f"{url} has schema version {version}, and no migration to version {SCHEMA_VERSION} exists",
        version=version,
        supported=SCHEMA_VERSION,
        url=url,
    )


def older_read_only(url: str, version: int, how: str) -> StoreVersionError:
    """An older store opened read-only. Such an open never migrates, and the reads know
    only the current shape (there is no second read path for old files), so it refuses
    and says how to migrate: ``how`` is the adapter's own way to open it for writing."""
    return StoreVersionError(
        f"{url} has schema version {version}, older than version {SCHEMA_VERSION} of this "
        "prism_om, and a read-only open does not migrate it: open it once for writing, "
        f"which migrates it in place in one transaction ({how}), then read it",
        version=version,
        supported=SCHEMA_VERSION,
        url=url,
    )


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
