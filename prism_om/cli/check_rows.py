"""What ``prism-om check`` reads beyond ``PRAGMA quick_check`` in a SQLite store.

Since schema version 4 a read builds entries from the store's own rows without
validating them again (``stores/_rows.py``), and the live pool (``om_live``) is trusted
at a segment's tail. A file can be sound to SQLite and still hold a row that no longer
validates (a timestamp edited by hand, a body cut short by a tool) or a derived table that
disagrees with the entries. The check reads every row once, validating it as an import
would, and compares each leaf's stored memory with the fold of its entries, so such damage
is reported (and ``--repair`` copies the sessions without it) instead of served.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Set
from dataclasses import dataclass, field
from urllib.parse import quote

from ..core.ledger import fold_ledger
from ..core.ledger_views import live_ledger
from ..entries import entry_from_wire
from ..errors import InvalidEntryError, PrismMemoryError, StoreVersionError
from ..stores._rows import MESSAGE_DATA_SINCE_VERSION, entry_columns, wire_from_row
from ..stores._schema import SCHEMA_VERSION
from ..stores.base import SessionStore

__all__ = ["RowProblems", "sqlite_memory_problems", "sqlite_row_problems", "store_memory_problems"]

# Rows read per statement: bounded memory on any store size.
_CHUNK = 2000


@dataclass
class RowProblems:
    """Entries of a SQLite store that do not validate, by session."""

    problems: list[str] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)


def sqlite_row_problems(path: str, limit: int = 20) -> RowProblems:
    """Validate every entry row of the store at ``path`` (read-only), in append order.

    A row is checked as an import checks an entry (``entry_from_wire``), and its parent
    must be an entry of the same session appended before it. At most ``limit`` problems
    are described; every session with a bad row is named in ``sessions``.
    """
    found = RowProblems()
    conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0]) or SCHEMA_VERSION
        seen: dict[str, str] = {}  # entry id -> session id, of the rows read so far
        last = 0
        columns = entry_columns(data=version >= MESSAGE_DATA_SINCE_VERSION)
        while True:
            rows = conn.execute(
                f"SELECT seq, {columns} FROM entries WHERE seq > ? ORDER BY seq LIMIT ?",
                (last, _CHUNK),
            ).fetchall()
            if not rows:
                break
            for seq, *row in rows:
                last = seq
                entry_id, session_id, parent_id = str(row[0]), str(row[1]), row[2]
                reason = _row_reason(row, version, seq)
                if reason is None and parent_id is not None and seen.get(parent_id) != session_id:
                    reason = f"its parent {parent_id!r} is not an earlier entry of its session"
                seen[entry_id] = session_id
                if reason is not None:
                    found.sessions.add(session_id)
                    if len(found.problems) < limit:
                        found.problems.append(
                            f"entry {entry_id!r} of session {session_id!r} (row {seq}): {reason}"
                        )
    finally:
        conn.close()
    return found


def _row_reason(row: list[object], version: int, seq: int) -> str | None:
    try:
        entry = entry_from_wire(wire_from_row(row, version), where=f"row {seq}")
    except InvalidEntryError as exc:
        return str(exc).splitlines()[0]
    if entry.id != row[0] or entry.session_id != row[1] or entry.kind != row[3]:
        return "its body names another entry than its columns"
    return None


async def sqlite_memory_problems(path: str, skip: Set[str], limit: int = 20) -> list[str]:
    """Each leaf's stored memory (``ledger``, ``live_ledger``) against the fold of its
    entries, for every session not in ``skip`` (those already have bad rows).

    A file of an older schema version is not migrated by a check, and a read-only open
    refuses it: its memory is compared on a migrated copy in a temporary directory (what
    its first writable open would make of it), and the file is left as it is.
    """
    from ..stores.sqlite import SqliteStore

    try:
        store = await SqliteStore.open(path, read_only=True)
    except StoreVersionError as exc:
        if exc.version > exc.supported:
            raise
        with tempfile.TemporaryDirectory(prefix="prism-om-check-") as scratch:
            copy = await asyncio.to_thread(_copy_of, path, scratch)
            async with await SqliteStore.open(copy, create=False) as migrated:
                found = await store_memory_problems(migrated, skip, limit)
            # A problem names the copy; the user knows the file as ``path``.
            return [problem.replace(copy, path) for problem in found]
    async with store:
        return await store_memory_problems(store, skip, limit)


def _copy_of(path: str, directory: str) -> str:
    """A copy of the file at ``path`` (and its WAL) in ``directory``; its path."""
    copy = os.path.join(directory, "migrated.db")
    for suffix in ("", "-wal"):
        if os.path.exists(path + suffix):
            shutil.copyfile(path + suffix, copy + suffix)
    return copy


async def store_memory_problems(
    store: SessionStore, skip: Set[str] = frozenset(), limit: int = 20
) -> list[str]:
    """Each leaf's stored memory against the fold of its entries, through the store API
    (any adapter: a PostgreSQL server's fold tables are checked the same way)."""
    problems: list[str] = []
    for sid in await store.sessions():
        if sid in skip:
            continue
        for leaf in await store.leaves(sid):
            try:
                folded = fold_ledger(await store.entries(sid, leaf))
                stored = await store.ledger(sid, leaf)
                live = await store.live_ledger(sid, leaf)
            except PrismMemoryError as exc:
                problems.append(f"session {sid!r} leaf {leaf!r}: {exc}")
                continue
            if stored != folded or live != live_ledger(folded):
                which = "memory" if stored != folded else "live memory (om_live)"
                problems.append(
                    f"session {sid!r} leaf {leaf!r}: the stored {which} differs from the "
                    "fold of its entries"
                )
            if len(problems) >= limit:
                return problems
    return problems
