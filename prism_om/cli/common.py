"""What every subcommand shares: the store URL, opening it, and the CLI's own errors."""

from __future__ import annotations

import argparse
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from ..errors import InvalidInputError, StoreNotFoundError
from ..stores import SessionStore, open_store, parse_store_url

__all__ = [
    "DEFAULT_DB",
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliUsageError",
    "count_argument",
    "entry_id_argument",
    "memory_id_argument",
    "session_id_argument",
    "shown",
    "open_cli_store",
    "require_session",
    "store_url",
]

DEFAULT_DB = "prism-om-demo.db"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class CliUsageError(InvalidInputError):
    """Bad input the CLI itself detects (exit code 2)."""


def store_url(value: str) -> str:
    """A store URL as given, or a bare path meaning a SQLite file."""
    if _SCHEME.match(value) and not re.match(r"^[A-Za-z]:[\\/]", value):
        return value  # a URL; open_store names the schemes it knows if this is not one
    return f"sqlite:{value}"


@asynccontextmanager
async def open_cli_store(
    db: str, *, create: bool = False, write: bool = False
) -> AsyncIterator[SessionStore]:
    """Open the store ``--db`` names: read-only unless ``write`` (or ``create``).

    Only ``create`` may make a new store; without it the store must exist already, so a
    mistyped path (or a stray empty file) never turns into an empty store. A command that
    writes refuses ``memory:``, where nothing it wrote would outlive the command.
    """
    url = store_url(db)
    scheme, path = parse_store_url(url)
    writing = write or create
    if writing and scheme == "memory":
        raise CliUsageError(
            f"--db {db!r} is an in-memory store: nothing written to it would last past this "
            "command; pass a sqlite: file or a jsonl: directory",
            url=url,
        )
    # A server store exists once its tables do: only the server can say, so open_store's
    # StoreNotFoundError answers for it (and a read never creates the tables).
    server = scheme == "postgresql"
    if not create and scheme != "memory" and not server and not _exists(path):
        raise CliUsageError(_missing(path, url), url=url)
    try:
        opened = await open_store(url, read_only=not writing, create=create)
    except StoreNotFoundError as exc:
        if server:
            # exc names the URL with its password hidden; path would not.
            hint = "run 'prism-om demo --db URL' or 'prism-om import FILE --db URL' first"
            raise CliUsageError(f"{exc}; {hint}", url=exc.url) from exc
        raise CliUsageError(f"{exc}; {_missing(path, url)}", url=url) from exc
    async with opened as store:
        yield store


def _missing(path: str, url: str) -> str:
    return (
        f"no store at {path!r} ({url}): run 'prism-om demo' or 'prism-om import FILE "
        "--db ...' first, or pass --db"
    )


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
        raise CliUsageError(
            f"no session {session_id!r} in {store.url}{hint}",
            session_id=session_id,
            url=store.url,
        )


# -- argument types: a bad value is a one-line usage error (exit 2) naming the argument ------


def shown(value: str, limit: int = 40) -> str:
    """``value`` for an error message: whole when short, else its start and its length."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


def count_argument(minimum: int, maximum: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``[minimum, maximum]``, refused otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"expected an integer from {minimum} to {maximum:,}, got {shown(text)}"
            )
        return value

    return parse


def entry_id_argument(text: str) -> str:
    """An argparse type: an entry id (1-256 characters)."""
    from ..core.records import ENTRY_ID_MAX_CHARS

    if not text or len(text) > ENTRY_ID_MAX_CHARS:
        raise argparse.ArgumentTypeError(
            f"expected an entry id of 1-{ENTRY_ID_MAX_CHARS} characters, got {shown(text)}"
        )
    return text


def memory_id_argument(text: str) -> str:
    """An argparse type: a 12-hex memory id."""
    from ..ids import is_memory_id

    if not is_memory_id(text):
        raise argparse.ArgumentTypeError(
            f"expected a memory id of 12 lowercase hex characters, got {shown(text)}"
        )
    return text


def session_id_argument(text: str) -> str:
    """An argparse type: a session id (1-128 characters of [A-Za-z0-9._:-])."""
    from ..entries import validate_session_id
    from ..errors import InvalidSessionIdError

    try:
        return validate_session_id(text)
    except InvalidSessionIdError:
        raise argparse.ArgumentTypeError(
            f"expected a session id of 1-128 characters of [A-Za-z0-9._:-] starting with a "
            f"letter or digit, got {shown(text)}"
        ) from None
