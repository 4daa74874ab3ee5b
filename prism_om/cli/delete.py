"""``prism-om delete SESSION``: erase one session from a store (the right to erase).

The store's ``delete_session`` removes every entry, branch, leaf and memory row of the
session at once (SQLite: ``secure_delete`` on, then ``VACUUM`` and a WAL checkpoint, so no
copy stays in the file's free space; JSONL: the file and its sidecars). Nothing asks
twice in a script: without ``--yes`` the command asks on a terminal and refuses when
stdin is not one, so a pipe never deletes by accident.

A tombstone session (``tombstones.<scope>``) is refused unless ``--allow-tombstones`` is
given: it records revocations, and erasing it lets every id it revokes back into every
read. With the flag, the confirmation and the report say how many ids become visible.

A JSONL delete that was killed after it committed reads as no session; running the command
again finishes the erasure and says so.

A damaged JSONL session is erased too, without ``check --repair`` first. The text may
survive outside the store, and the command says where it knows of: backups that
``check --repair`` made under their default names (``<store>.backup-<time>``; a JSONL one
that holds the session's file, every SQLite one, as each is a copy of the whole file),
which it leaves for the user to remove; on SQLite, WAL frames a reader in another
process kept the checkpoint from copying back (``"walFramesPending"`` in ``--json``); on
PostgreSQL, the server's own copies (``"serverKeepsText"``): the deleted rows' bytes stay
in the tables' files until ``VACUUM FULL`` (``"vacuumFullSql"``) rewrites them, and in its
WAL, archives, replicas and backups until those are recycled. The command does not run
that ``VACUUM FULL``: it locks the store's tables against every read and write while it
copies them (docs/erasure.md).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

from ..errors import CorruptStoreError, MalformedTombstoneWarning, SessionNotFoundError
from ..observational_memory.revocation import TOMBSTONE_SESSION_PREFIX
from ..stores import SessionStore, parse_store_url
from .common import CliUsageError, open_cli_store, require_session
from .output import console, error_console, print_json

__all__ = ["cmd_delete"]


def _backups_holding(url: str, session_id: str) -> list[str]:
    """Default-named ``check --repair`` backups that may hold the session's text."""
    scheme, path = parse_store_url(url)
    if scheme not in ("jsonl", "sqlite") or not path:
        return []
    found = []
    for backup in sorted(
        glob.glob(glob.escape(os.path.abspath(path).rstrip(os.sep)) + ".backup-*")
    ):
        if scheme == "jsonl":
            names = (session_id + ".jsonl", session_id + ".leaf.json")
            if any(os.path.lexists(os.path.join(backup, n)) for n in names):
                found.append(os.path.join(backup, session_id + ".jsonl"))
        elif not backup.endswith(("-wal", "-shm", "-journal")):
            found.append(backup)
    return found


def _confirmed(
    session_id: str, entries: int | None, url: str, tombstones: bool, released: int | None
) -> bool:
    if not sys.stdin.isatty():
        raise CliUsageError(
            f"refusing to delete session {session_id!r} from {url} without --yes: stdin is "
            "not a terminal to confirm on",
            session_id=session_id,
            url=url,
        )
    size = "damaged" if entries is None else f"{entries:,} entries"
    lets_back = f" {_released_text(session_id, released)}." if tombstones else ""
    error_console().print(
        f"delete session {session_id!r} ({size}) from {url}?{lets_back} This cannot be "
        "undone. [y/N] ",
        end="",
    )
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


async def _finish_interrupted(store: SessionStore, session_id: str) -> int | None:
    """The entry count of an interrupted delete of the session that this finishes, or
    None when there was none (a JSONL delete killed after its commit reads as no session,
    and ``delete_session`` finishes the erasure; elsewhere a missing session is missing)."""
    try:
        return await store.delete_session(session_id)
    except SessionNotFoundError:
        return None


async def _revoked_by(store: SessionStore, session_id: str) -> int:
    """How many ids the tombstone session withholds: deleting it makes them visible again
    to every read of its scope."""
    import warnings

    from ..observational_memory.revocation import list_invalidated_ids

    with warnings.catch_warnings():
        # A malformed record withholds nothing, so it changes no count; the read commands
        # say it, and erasing the session is what ends it.
        warnings.simplefilter("ignore", MalformedTombstoneWarning)
        return len(await list_invalidated_ids(store, session_id[len(TOMBSTONE_SESSION_PREFIX) :]))


def _released_text(session_id: str, count: int | None) -> str:
    scope = session_id[len(TOMBSTONE_SESSION_PREFIX) :]
    ids = (
        "ids (how many is unknown: the session is damaged)" if count is None else f"{count:,} id(s)"
    )
    return (
        f"its tombstones revoke {ids}, which become visible again to every read of scope {scope!r}"
    )


async def cmd_delete(args: argparse.Namespace) -> None:
    session_id: str = args.session_id
    async with open_cli_store(args.db, write=True) as store:
        entries: int | None = None
        try:
            await require_session(store, session_id)
            entries = len(await store.list(session_id))
        except CorruptStoreError:
            pass  # damaged (JSONL): still the user's to erase, with no repair first
        except CliUsageError:
            finished = await _finish_interrupted(store, session_id)
            if finished is None:
                raise
            _print_finished(args, session_id, finished, store.url)
            return
        tombstones = session_id.startswith(TOMBSTONE_SESSION_PREFIX)
        released: int | None = None
        if tombstones:
            if not args.allow_tombstones:
                raise CliUsageError(
                    f"session {session_id!r} holds revocation tombstones; deleting it would "
                    "make revoked memory readable again, so 'delete' refuses it without "
                    "--allow-tombstones (every id it revokes becomes visible again)",
                    session_id=session_id,
                )
            if entries is not None:
                released = await _revoked_by(store, session_id)
        if not args.yes and not _confirmed(session_id, entries, store.url, tombstones, released):
            error_console().print("prism-om: nothing deleted")
            return
        deleted = await store.delete_session(session_id)
        url = store.url
        left = await store.erasure_report()
        pending, rewrite = left.wal_frames_pending, left.rewrite_statement
    backups = _backups_holding(url, session_id)
    if args.json:
        report = {
            "session": session_id,
            "deletedEntries": deleted,
            "url": url,
            "walFramesPending": pending,
            "serverKeepsText": rewrite is not None,
            "vacuumFullSql": rewrite,
            "backups": backups,
        }
        if tombstones:
            report["revokedIdsVisibleAgain"] = released
        print_json(report)
        return
    out = console()
    if pending:
        out.print(
            f"deleted session {session_id} ({deleted:,} entries) from {url}, but another "
            f"process reading the database kept {pending:,} WAL frames from being copied "
            "back: the erased text stays in the file's bytes until the next checkpoint "
            "(close the other processes using this database; the last to close runs it)",
            markup=False,
        )
    else:
        out.print(f"deleted session {session_id} ({deleted:,} entries) from {url}", markup=False)
    if tombstones:
        out.print(_released_text(session_id, released), markup=False)
    if rewrite is not None:
        out.print(
            "PostgreSQL still holds the deleted rows' bytes: in the tables' files until "
            "VACUUM FULL rewrites them (a plain VACUUM, autovacuum's too, leaves them in "
            "place), and in its WAL and any WAL archive, replica or backup until those "
            "are recycled, which no client can do. To rewrite the tables (it locks them "
            "against every read and write while it runs, and needs their owner):",
            markup=False,
        )
        out.print(f"{rewrite};", markup=False, soft_wrap=True)
    for backup in backups:
        out.print(
            f"a backup made by 'check --repair' may still hold its text: {backup} "
            "(remove it by hand if it must go too)",
            markup=False,
        )


def _print_finished(args: argparse.Namespace, session_id: str, deleted: int, url: str) -> None:
    if args.json:
        print_json(
            {
                "session": session_id,
                "deletedEntries": deleted,
                "url": url,
                "walFramesPending": 0,
                "backups": _backups_holding(url, session_id),
                "finishedInterrupted": True,
            }
        )
        return
    console().print(
        f"finished deleting session {session_id} ({deleted:,} entries) from {url}: an "
        "earlier delete had been interrupted after it began, and its erasure is now done",
        markup=False,
    )
