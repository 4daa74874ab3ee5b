"""``sqlite3`` errors at the adapter's boundary, translated into ``StoreError``s."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import resource
import sqlite3
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiosqlite

from ...errors import (
    CorruptStoreError,
    StoreBusyError,
    StoreError,
)

T = TypeVar("T")
# After SQLite's own busy_timeout wait: this many attempts in all, with a short backoff.
BUSY_ATTEMPTS = 4
BUSY_BACKOFF_S = 0.05


_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_CORRUPT_WORDS = ("malformed", "not a database", "could not decode", "corrupt")


def primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _is_busy(exc: sqlite3.Error) -> bool:
    return primary_code(exc) in _BUSY_CODES or "database is locked" in str(exc)


def translate_error(url: str, action: str, exc: sqlite3.Error) -> StoreError:
    """The prism_om error for a ``sqlite3`` error (the caller chains it with ``from``)."""
    text = str(exc)
    if _is_busy(exc):
        return StoreBusyError(
            f"{action} on {url}: the file stayed locked by another writer", url=url
        )
    if primary_code(exc) in _CORRUPT_CODES or any(w in text.lower() for w in _CORRUPT_WORDS):
        return CorruptStoreError(f"{action} on {url}: the file is unreadable ({text})", url=url)
    if primary_code(exc) == sqlite3.SQLITE_FULL or _extended_code(exc) in _WRITE_FAILED_CODES:
        return StoreError(f"{action} on {url} failed: {_write_failure(url, text)}", url=url)
    return StoreError(f"{action} on {url} failed: {text}", url=url)


# SQLite reports a short write (EFBIG past ``ulimit -f``, ENOSPC) as "disk I/O error" or
# "database or disk is full", without errno: say which limits could be the cause.
_WRITE_FAILED_CODES = frozenset(
    {
        sqlite3.SQLITE_IOERR_WRITE,
        sqlite3.SQLITE_IOERR_FSYNC,
        sqlite3.SQLITE_IOERR_TRUNCATE,
        sqlite3.SQLITE_IOERR_SHMSIZE,
    }
)


def _extended_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code if isinstance(code, int) else None


def _write_failure(url: str, text: str) -> str:
    location = url.removeprefix("sqlite:")
    files = f"{location!r} (or its -wal/-journal file)"
    causes = []
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        causes.append(f"the file size limit of this process (ulimit -f: {soft} bytes) was reached")
    with contextlib.suppress(OSError):
        stat = os.statvfs(os.path.dirname(os.path.abspath(location)))
        free = stat.f_bavail * stat.f_frsize
        # A few pages' worth left counts as full: SQLite grows files a page at a time.
        if free < 1 << 20:
            causes.append(f"the disk holding it is full ({free} bytes free)")
    if not causes:
        return f"could not write {files}: {text}"
    return f"could not write {files}: {' or '.join(causes)} ({text})"


async def retrying(url: str, action: str, operation: Callable[[], Awaitable[T]]) -> T:
    """Run ``operation``, retrying a busy file a few times, translating sqlite3 errors."""
    for attempt in range(1, BUSY_ATTEMPTS + 1):
        try:
            return await operation()
        except sqlite3.Error as exc:
            if not _is_busy(exc) or attempt == BUSY_ATTEMPTS:
                raise translate_error(url, action, exc) from exc
        # Jitter keeps two waiting processes from retrying in lockstep.
        await asyncio.sleep(BUSY_BACKOFF_S * attempt * (0.5 + random.random()))
    raise AssertionError("unreachable")  # pragma: no cover


async def rollback_quietly(conn: aiosqlite.Connection) -> None:
    # The error that got us here is the one to report; a failed ROLLBACK (no transaction
    # left, or a broken file) adds nothing to it.
    with contextlib.suppress(sqlite3.Error):
        await conn.execute("ROLLBACK")


async def close_quietly(conn: aiosqlite.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        await conn.close()
