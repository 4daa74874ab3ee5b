"""``prism-om delete SESSION``: erase one session from a store (the right to erase).

The store's ``delete_session`` removes every entry, branch, leaf and memory row of the
session at once (SQLite: ``secure_delete`` on, then a WAL checkpoint; JSONL: the file and
its sidecars). Nothing asks twice in a script: without ``--yes`` the command asks on a
terminal and refuses when stdin is not one, so a pipe never deletes by accident.

A tombstone session (``tombstones.<scope>``) is refused: it records revocations, and
erasing it would let revoked memory back into every read.
"""

from __future__ import annotations

import argparse
import sys

from ..observational_memory.revocation import TOMBSTONE_SESSION_PREFIX
from .common import CliUsageError, open_cli_store, require_session
from .output import console, error_console, print_json

__all__ = ["cmd_delete"]


def _confirmed(session_id: str, entries: int, url: str) -> bool:
    if not sys.stdin.isatty():
        raise CliUsageError(
            f"refusing to delete session {session_id!r} from {url} without --yes: stdin is "
            "not a terminal to confirm on",
            session_id=session_id,
            url=url,
        )
    error_console().print(
        f"delete session {session_id!r} ({entries:,} entries) from {url}? "
        "This cannot be undone. [y/N] ",
        end="",
    )
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


async def cmd_delete(args: argparse.Namespace) -> None:
    session_id: str = args.session_id
    if session_id.startswith(TOMBSTONE_SESSION_PREFIX):
        raise CliUsageError(
            f"session {session_id!r} holds revocation tombstones; deleting it would make "
            "revoked memory readable again, so 'delete' refuses it",
            session_id=session_id,
        )
    async with open_cli_store(args.db, write=True) as store:
        await require_session(store, session_id)
        entries = len(await store.list(session_id))
        if not args.yes and not _confirmed(session_id, entries, store.url):
            error_console().print("prism-om: nothing deleted")
            return
        deleted = await store.delete_session(session_id)
        url = store.url
    if args.json:
        print_json({"session": session_id, "deletedEntries": deleted, "url": url})
    else:
        console().print(f"deleted session {session_id} ({deleted:,} entries) from {url}")
