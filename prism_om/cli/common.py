"""What every subcommand shares: the store URL, opening it, and the CLI's own errors."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from ..stores import SessionStore, open_store, parse_store_url

__all__ = [
    "DEFAULT_DB",
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliUsageError",
    "open_cli_store",
    "require_session",
    "store_url",
]

DEFAULT_DB = "prism-om-demo.db"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class CliUsageError(Exception):
    """Bad input the CLI itself detects (exit code 2)."""


def store_url(value: str) -> str:
    """A store URL as given, or a bare path meaning a SQLite file."""
    if _SCHEME.match(value) and not re.match(r"^[A-Za-z]:[\\/]", value):
        return value  # a URL; open_store names the schemes it knows if this is not one
    return f"sqlite:{value}"


@asynccontextmanager
async def open_cli_store(db: str, *, create: bool = False) -> AsyncIterator[SessionStore]:
    """Open the store ``--db`` names; unless ``create``, it must exist already.

    Opening a SQLite file or a JSONL directory creates it, so a read with a mistyped path
    would leave an empty store behind; reads refuse a missing one instead.
    """
    url = store_url(db)
    scheme, path = parse_store_url(url)
    if not create and scheme != "memory" and not _exists(path):
        raise CliUsageError(
            f"no store at {path!r} ({url}): run 'prism-om demo' or 'prism-om import FILE "
            "--db ...' first, or pass --db"
        )
    async with await open_store(url) as store:
        yield store


def _exists(path: str) -> bool:
    return Path(path).exists()


async def require_session(store: SessionStore, session_id: str) -> None:
    """Raise ``CliUsageError`` unless the store holds ``session_id``."""
    from ..entries import validate_session_id

    validate_session_id(session_id)
    if await store.leaf(session_id) is None:
        known = await store.sessions()
        hint = f"; sessions: {', '.join(known[:5])}" if known else "; the store is empty"
        if len(known) > 5:
            hint += f", ... ({len(known)} in all)"
        raise CliUsageError(f"no session {session_id!r} in {store.url}{hint}")
