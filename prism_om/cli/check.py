"""``prism-om check [--repair]``: find damaged store files, and save what can be saved.

JSONL: every session file is read in full (read-only, no lock); ``--repair`` copies each
damaged session's files into a backup directory, then cuts the session back to its last
valid entry (a symbolic link or other non-file is moved into the backup instead).

SQLite: ``PRAGMA quick_check`` on a read-only connection (never on the open path of a
healthy store: it reads every page), then every entry row validated and each leaf's stored
memory compared with the fold of its entries (``check_rows.py``). ``--repair`` copies the
file (and its WAL) to a backup, then copies every readable session through the public
store API into a new file, session by session, reporting what was copied and what was
lost. The damaged file is left as it was; the new one replaces it when the user moves it
into place.

A backup never replaces anything: an existing ``--backup`` (a file, or a directory that
holds a file the backup would write) is a usage error, and default names carry a
timestamp and, when that is taken, a counter.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..entries import SessionEntry
from ..errors import CorruptStoreError, InvalidEntryError, PrismMemoryError, StoreError
from ..stores import parse_store_url
from ..stores.sqlite import DAMAGED_SUFFIX
from .check_rows import RowProblems, sqlite_memory_problems, sqlite_row_problems
from .common import CliUsageError, store_url
from .output import console, print_json
from .redaction import cli_redactor

__all__ = ["SqliteSessionCopy", "cmd_check", "copy_readable_sessions", "sqlite_quick_check"]

# Entries per append_many when copying: bounded memory per batch, few transactions.
_COPY_BATCH = 500
# Rows a table scan steps over, one seek each, before giving up on the rest of the table.
_MAX_SCAN_STEPS = 100_000


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime())


# What a SQLite backup or scratch copy may leave beside its name.
_SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal", DAMAGED_SUFFIX)


def _unique_name(base: str, suffixes: tuple[str, ...] = ("",)) -> str:
    """``base``, or ``base-1``, ``base-2``...: the first name no file takes with any suffix.

    Two repairs within one second must not share a default backup: the second would
    replace the first, the only copy of what the first cut away.
    """
    candidate, counter = base, 0
    while any(os.path.lexists(candidate + suffix) for suffix in suffixes):
        counter += 1
        candidate = f"{base}-{counter}"
    return candidate


async def cmd_check(args: argparse.Namespace) -> None:
    url = store_url(args.db)
    scheme, path = parse_store_url(url)
    if scheme == "memory":
        raise CliUsageError("a memory: store keeps nothing on disk to check", url=url)
    if scheme == "postgresql":
        await _check_server(url, args)
        return
    if not _exists(path):
        raise CliUsageError(f"no store at {path!r} ({url})", url=url)
    if scheme == "jsonl":
        await _check_jsonl(path, args)
    else:
        await _check_sqlite(path, args)


# -- JSONL ------------------------------------------------------------------------------------


async def _check_jsonl(path: str, args: argparse.Namespace) -> None:
    from ..stores.jsonl.store import JsonlStore

    backup = args.backup or _unique_name(f"{_absolute(path).rstrip(os.sep)}.backup-{_stamp()}")
    if args.repair:
        async with await JsonlStore.open(path, create=False) as store:
            results = await store.repair(backup)
    else:
        async with await JsonlStore.open(path, read_only=True) as store:
            results = await store.check()
    red = cli_redactor(args)  # a problem quotes the damaged field, which can be a secret
    results = [replace(r, problem=red.text(r.problem)) if r.problem else r for r in results]
    damaged = [r for r in results if r.problem is not None]
    if args.json:
        print_json(
            {
                "store": f"jsonl:{path}",
                "repaired": bool(args.repair),
                "backup": backup if args.repair and damaged else None,
                "sessions": [
                    {
                        "session": r.session_id,
                        "ok": r.problem is None,
                        "entries": r.entries,
                        "problem": r.problem,
                        "uncommittedBytes": r.uncommitted_bytes,
                        **(
                            {
                                "lostEntries": r.lost_entries,
                                "lostBytes": r.lost_bytes,
                                "movedAside": r.moved_aside,
                            }
                            if args.repair and r.problem is not None
                            else {}
                        ),
                    }
                    for r in results
                ],
            }
        )
    else:
        out = console()
        if not results:
            out.print(f"jsonl:{path}: no sessions")
        for r in results:
            if r.problem is None:
                tail = (
                    f"; {r.uncommitted_bytes} uncommitted bytes (an interrupted append the "
                    "next write removes)"
                    if r.uncommitted_bytes
                    else ""
                )
                out.print(f"ok       {r.session_id}: {r.entries} entries{tail}", markup=False)
                continue
            out.print(f"DAMAGED  {r.session_id}: {r.problem}", markup=False)
            if not args.repair:
                out.print(f"         {r.entries} readable entries before the damage", markup=False)
            elif r.moved_aside:
                out.print(f"         not a regular file: moved into {backup}", markup=False)
            else:
                lost = "an unknown number of" if r.lost_entries is None else str(r.lost_entries)
                out.print(
                    f"         repaired: kept {r.entries} entries, lost {lost} entries "
                    f"({r.lost_bytes} bytes); the damaged files are in {backup}",
                    markup=False,
                )
    if damaged and not args.repair:
        raise CorruptStoreError(
            f"{len(damaged)} damaged session(s) in jsonl:{path}: "
            f"{', '.join(r.session_id for r in damaged)}; 'prism-om check --repair' cuts "
            "each back to its last valid entry after copying it to a backup",
            url=f"jsonl:{path}",
        )


# -- PostgreSQL -------------------------------------------------------------------------------


async def _check_server(url: str, args: argparse.Namespace) -> None:
    """Every session's entries read and each leaf's stored memory against their fold.

    The server owns its pages (``amcheck`` checks them); what prism_om can check is what it
    wrote: the rows read back as entries, and the fold tables agreeing with them.
    """
    from ..core.redaction import hide_url_passwords
    from .check_rows import store_memory_problems
    from .common import open_cli_store

    shown = hide_url_passwords(url)
    if args.repair:
        raise CliUsageError(
            "check --repair rewrites SQLite files and JSONL directories; on PostgreSQL run "
            f"'prism-om check --db {shown}' to find damage, then 'prism-om copy --from "
            f"{shown} --to sqlite:FILE' to save the readable sessions (or pg_dump)",
            url=shown,
        )
    async with open_cli_store(url) as store:
        try:
            problems = await store_memory_problems(store)
            sessions = len(await store.sessions())
        except PrismMemoryError as exc:
            problems = [f"the store could not be read in full: {exc}"]
            sessions = 0
    problems = [cli_redactor(args).text(p) for p in problems]
    healthy = not problems
    if args.json:
        print_json({"store": shown, "ok": healthy, "sessions": sessions, "problems": problems})
    elif healthy:
        console().print(
            f"ok       {shown}: {sessions} session(s), every entry and leaf's memory read "
            "(the server's own pages: amcheck)",
            markup=False,
        )
    if not healthy:
        if not args.json:
            for problem in problems[:20]:
                console().print(f"DAMAGED  {problem}", markup=False)
        raise CorruptStoreError(
            f"{shown} failed its row and memory check ({len(problems)} problem(s)); "
            f"'prism-om copy --from {shown} --to sqlite:FILE' saves the readable sessions",
            url=shown,
        )


# -- SQLite -----------------------------------------------------------------------------------


def sqlite_quick_check(path: str) -> list[str]:
    """``PRAGMA quick_check`` on a read-only connection: ``["ok"]`` for a sound file.

    A file SQLite cannot open at all gives its error as the one problem. The connection
    is ``mode=ro``; where the WAL's shared-memory file cannot be created (a read-only
    directory), ``immutable=1``.
    """
    target = quote(os.path.abspath(path))
    last: sqlite3.Error | None = None
    for flags in ("mode=ro", "mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(f"file:{target}?{flags}", uri=True)
        except sqlite3.Error as exc:
            last = exc
            continue
        try:
            return [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
        except sqlite3.OperationalError as exc:
            last = exc
            if "unable to open" not in str(exc) and "readonly" not in str(exc):
                return [str(exc)]
        except sqlite3.DatabaseError as exc:
            return [str(exc)]
        finally:
            conn.close()
    return [str(last)]


@dataclass
class SqliteSessionCopy:
    """What happened to one session when a damaged SQLite store was copied."""

    session_id: str
    copied: int = 0
    total: int | None = None  # entries the damaged store still lists, when it could
    problem: str | None = None
    notes: list[str] = field(default_factory=list)


def _raw_session_ids(path: str) -> list[str]:
    """Session ids straight from the tables, for a store whose ``sessions()`` fails."""
    conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True)
    try:
        for sql in (
            "SELECT session_id FROM sessions ORDER BY seq",
            "SELECT DISTINCT session_id FROM entries",
        ):
            try:
                return [str(row[0]) for row in conn.execute(sql)]
            except sqlite3.DatabaseError:
                continue
        return []
    finally:
        conn.close()


def _scan_session(path: str, sid: str) -> tuple[list[SessionEntry], int, int]:
    """The session's readable entries by a scan of the table in append order.

    Used when the store's indexed reads fail: a damaged index does not stop a scan of
    the table, and a damaged table page is stepped over by seeking past it (rowid seeks
    go through the interior pages). An entry whose parent was not read is dropped, with
    its descendants, so what is returned can be appended in order. Returns the entries,
    how many were dropped so, and how many unreadable stretches the scan stepped over.
    """
    from ..entries import entry_from_wire
    from ..errors import InvalidEntryError
    from ..stores._rows import MESSAGE_DATA_SINCE_VERSION, entry_columns, wire_from_row
    from ..stores._schema import SCHEMA_VERSION

    conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True)
    entries: list[SessionEntry] = []
    kept: set[str] = set()
    dropped = gaps = steps = 0
    last, in_gap = 0, False
    try:
        # Schema 4 keeps the envelope in columns and the payload in body (stores/_rows.py).
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.DatabaseError:
            version = SCHEMA_VERSION
        while steps < _MAX_SCAN_STEPS:
            try:
                columns = entry_columns(data=version >= MESSAGE_DATA_SINCE_VERSION)
                rows = conn.execute(
                    f"SELECT seq, {columns} FROM entries WHERE seq > ? ORDER BY seq",
                    (last,),
                )
                for seq, *row in rows:
                    last, in_gap = seq, False
                    if row[1] != sid:
                        continue
                    try:
                        wire = wire_from_row(row, version)
                        entry = entry_from_wire(wire, where=f"row {seq}")
                    except InvalidEntryError:
                        dropped += 1
                        continue
                    if entry.parent_id is not None and entry.parent_id not in kept:
                        dropped += 1
                        continue
                    entries.append(entry)
                    kept.add(entry.id)
                break
            except sqlite3.DatabaseError:
                # Before the session's root, a stretch cannot hold its entries (the
                # root is its first); a lost root shows as dropped entries or none.
                gaps += 0 if in_gap or not kept else 1
                in_gap = True
                steps += 1
                last += 1  # step over the row that could not be read
    finally:
        conn.close()
    return entries, dropped, gaps


async def copy_readable_sessions(
    source: str, target: str, scan: set[str] | frozenset[str] = frozenset()
) -> list[SqliteSessionCopy]:
    """Copy each session of the SQLite store ``source`` that can be read into ``target``.

    Sessions go one at a time through the public API, all entries in append order, then
    the leaf. A session the store cannot list, or one in ``scan`` (rows that do not
    validate), is read by a validating table scan, which keeps the entries up to the
    first damaged page and drops a bad row with its descendants.
    """
    from ..stores.sqlite import SqliteStore

    results: list[SqliteSessionCopy] = []
    async with await SqliteStore.open(source) as damaged, await SqliteStore.open(target) as fresh:
        try:
            session_ids = await damaged.sessions()
        except PrismMemoryError:
            session_ids = await asyncio.to_thread(_raw_session_ids, source)
        for sid in session_ids:
            report = SqliteSessionCopy(sid)
            results.append(report)
            try:
                if sid in scan:
                    raise InvalidEntryError(f"session {sid!r} holds rows that do not validate")
                entries = await damaged.list(sid)
                report.total = len(entries)
            except PrismMemoryError as exc:
                entries, dropped, gaps = await asyncio.to_thread(_scan_session, source, sid)
                report.notes.append(f"read by a table scan ({exc})")
                if not entries:
                    report.problem = "no entry of it could be read"
                elif gaps or dropped:
                    report.problem = (
                        f"the scan stepped over {gaps} unreadable stretch(es) of the table "
                        f"and dropped {dropped} entries whose parent was lost; entries of "
                        "this session inside those stretches are lost"
                    )
            try:
                for start in range(0, len(entries), _COPY_BATCH):
                    await fresh.append_many(entries[start : start + _COPY_BATCH])
                    report.copied += len(entries[start : start + _COPY_BATCH])
                leaf = await damaged.leaf(sid)
                if leaf is not None and leaf != await fresh.leaf(sid):
                    await fresh.checkout(sid, leaf)
            except PrismMemoryError as exc:
                if report.copied < len(entries):
                    report.problem = report.problem or f"copy stopped: {exc}"
                else:
                    report.notes.append(f"the leaf could not be read ({exc}); it is the last entry")
    return results


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _absolute(path: str) -> str:
    return os.path.abspath(path)


def _remove(path: str) -> None:
    # A read that meets the damage leaves a note beside the scratch copy too.
    for suffix in _SQLITE_SIDE_FILES:
        Path(path + suffix).unlink(missing_ok=True)


def _backup_and_scratch(path: str, backup: str, target: str) -> str:
    """Copy the damaged file (and WAL) to ``backup`` and to a scratch copy to read from.

    Opening a store may write to it, and neither the damaged file nor its backup should
    change, so the sessions are read from the scratch copy (removed afterwards).
    """
    if os.path.lexists(target):
        raise CliUsageError(f"--output {target!r} exists; name a new file")
    for suffix in ("", "-wal"):
        if os.path.lexists(backup + suffix):
            raise CliUsageError(f"--backup {backup + suffix!r} exists; name a new file")
    if os.path.abspath(backup) == os.path.abspath(target):
        raise CliUsageError(f"--backup and --output are both {backup!r}; name two files")
    scratch = _unique_name(f"{target}.reading", _SQLITE_SIDE_FILES)
    for copy in (backup, scratch):
        for suffix in ("", "-wal"):
            if os.path.exists(path + suffix):
                shutil.copy2(path + suffix, copy + suffix)
    return scratch


async def _check_sqlite(path: str, args: argparse.Namespace) -> None:
    problems = sqlite_quick_check(path)
    healthy = problems == ["ok"]
    bad_rows = RowProblems()
    what = "PRAGMA quick_check"
    if healthy:
        # Sound to SQLite; now every row as an import would check it, and each leaf's
        # stored memory against its entries (check_rows.py says why).
        try:
            bad_rows = await asyncio.to_thread(sqlite_row_problems, path)
            memory = await sqlite_memory_problems(path, bad_rows.sessions)
        except (sqlite3.DatabaseError, PrismMemoryError) as exc:
            memory = [f"the store could not be read in full: {exc}"]
        if bad_rows.problems or memory:
            problems, healthy = [*bad_rows.problems, *memory], False
            what = "its row and memory check"
    out = console()
    if not args.repair:
        if args.json:
            print_json({"store": f"sqlite:{path}", "ok": healthy, "problems": problems})
        elif healthy:
            out.print(
                f"ok       sqlite:{path}: quick_check passed, every row and leaf's memory read",
                markup=False,
            )
        if not healthy:
            if not args.json:
                for problem in problems[:20]:
                    out.print(f"DAMAGED  {problem}", markup=False)
            raise CorruptStoreError(
                f"sqlite:{path} failed {what} ({len(problems)} problem(s)); "
                "'prism-om check --repair' copies its readable sessions into a new file",
                url=f"sqlite:{path}",
            )
        return
    if healthy:
        if args.json:
            print_json({"store": f"sqlite:{path}", "ok": True, "repaired": False})
        else:
            out.print(f"ok       sqlite:{path}: quick_check passed; nothing to repair")
        return
    stamp = _stamp()
    backup = args.backup or _unique_name(f"{path}.backup-{stamp}", ("", "-wal"))
    target = args.output or _unique_name(f"{path}.repaired-{stamp}", _SQLITE_SIDE_FILES)
    scratch = _backup_and_scratch(path, backup, target)
    try:
        copies = await copy_readable_sessions(scratch, target, scan=bad_rows.sessions)
    except StoreError as exc:
        _remove(target)
        raise CorruptStoreError(
            f"sqlite:{path} cannot be opened to copy its sessions ({exc}); the backup is {backup}",
            url=f"sqlite:{path}",
        ) from exc
    finally:
        _remove(scratch)
    for c in copies:  # errors name the scratch copy; the user knows the file as ``path``
        c.problem = c.problem and c.problem.replace(scratch, path)
    rows: list[dict[str, Any]] = [
        {
            "session": c.session_id,
            "copied": c.copied,
            "entries": c.total,
            "problem": c.problem,
            "notes": c.notes,
        }
        for c in copies
    ]
    if args.json:
        print_json(
            {
                "store": f"sqlite:{path}",
                "ok": False,
                "problems": problems,
                "backup": backup,
                "repaired": target,
                "sessions": rows,
            }
        )
        return
    for c in copies:
        if c.problem is None:
            notes = f" ({'; '.join(c.notes)})" if c.notes else ""
            out.print(f"copied   {c.session_id}: {c.copied} entries{notes}", markup=False)
        else:
            extra = f" ({'; '.join(c.notes)})" if c.notes else ""
            out.print(
                f"LOST     {c.session_id}: copied {c.copied} entries{extra}: {c.problem}",
                markup=False,
            )
    out.print(
        f"backup of the damaged file: {backup}\nreadable sessions copied into: {target} "
        "(check it, then move it into place)",
        markup=False,
    )
