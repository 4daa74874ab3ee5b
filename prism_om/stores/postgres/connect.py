"""The store's first server connection, made at open: fail fast on what waiting cannot fix.

Opening the pool straight away hid why a server could not be reached: psycopg_pool
retries every failed connection in the background, logs a warning per attempt and, at
``timeout_s``, reports only that no connection came in time. A wrong database name, an
unknown role or a rejected password then cost the full 30 s and ended in a message about
waiting. So the open makes its first connection itself:

- a failure that waiting can end (the server refusing connections or not listening yet,
  starting up, shutting down for a restart, out of connection slots, a connect timeout)
  is retried, quietly, with a growing pause, until ``timeout_s`` has passed;
- any other failure (unknown database or role, authentication, a host name that does not
  resolve, an SSL or URL problem) raises at once;

both as ``StoreUnreachableError`` with the URL (password hidden) and the server's reason.
The connection then serves the schema check and, as the reader's first lane, the reads;
the pool opens empty behind it.

Later, a call that waited ``timeout_s`` for a pooled connection in vain is told apart the
same way (``pool_timeout_error``): one direct attempt (at most ``PROBE_TIMEOUT_S``) says
whether the server refuses connections (``StoreUnreachableError``, with its reason) or
answers, so that the pool is busy or still reconnecting (``StoreBusyError``). Only the failure
path pays for it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, cast

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...core.redaction import hide_url_passwords, redact_text, url_passwords
from ...errors import StoreBusyError, StoreError, StoreUnreachableError

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "PROBE_TIMEOUT_S",
    "TRANSIENT_CONNECT_FAILURES",
    "first_connection",
    "is_transient_connect_failure",
    "pool_timeout_error",
    "reason",
]

_log = logging.getLogger("prism_om.stores.postgres")

# Lower-cased pieces of libpq's messages for failures a wait can end (libpq reports them
# without an SQLSTATE: psycopg's ``sqlstate`` is None for every failure to connect).
TRANSIENT_CONNECT_FAILURES = (
    "connection refused",  # nothing listens on the port (yet, or during a restart)
    "no such file or directory",  # the Unix socket is gone while the server restarts
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "too many clients already",
    "remaining connection slots are reserved",
    "timeout expired",  # libpq's connect_timeout
    "server closed the connection unexpectedly",
    "connection reset by peer",
)
_FIRST_PAUSE_S = 0.05
# The direct attempt after a pool wait ran out: libpq's connect_timeout, whole seconds.
PROBE_TIMEOUT_S = 2
_LONGEST_PAUSE_S = 1.0
# How long an open waits for a server that refuses or does not answer yet, by default:
# long enough for a quick restart, short enough that a wrong port or a server that is not
# running fails a whole command within 5 s, its start-up included (the 30 s pool wait
# made it 31.6 s).
DEFAULT_CONNECT_TIMEOUT_S = 3.0
# The clock and pause of the open's retries (a test replaces them to count attempts).
_clock = time.monotonic
_pause = asyncio.sleep


def is_transient_connect_failure(exc: BaseException) -> bool:
    """True when waiting could end this failure to connect (see the module docstring)."""
    text = str(exc).lower()
    return any(piece in text for piece in TRANSIENT_CONNECT_FAILURES)


def reason(exc: BaseException, conninfo: str = "") -> str:
    """The driver's message on one line (libpq splits it with newlines and tabs), with
    the passwords of ``conninfo`` redacted: libpq quotes a malformed one whole
    (``invalid percent-encoded token: "..."``)."""
    text = " ".join(str(exc).split())
    text = hide_url_passwords(redact_text(text, url_passwords(conninfo)))
    return text.removeprefix("connection failed: ") or type(exc).__name__


async def first_connection(
    conninfo: str, url: str, timeout_s: float, **kwargs: Any
) -> psycopg.AsyncConnection[Any]:
    """A connection to the server, retried while the failure is transient, for at most
    ``timeout_s``; ``StoreUnreachableError`` naming ``url`` and the reason otherwise."""
    deadline = _clock() + timeout_s
    pause = _FIRST_PAUSE_S
    warned = False
    while True:
        left = deadline - _clock()
        try:
            # libpq's connect_timeout is whole seconds (2 at least), per attempt: never
            # more than the wait has left, so the whole open ends near timeout_s.
            attempt = max(2, math.ceil(left))
            return await psycopg.AsyncConnection.connect(
                conninfo, connect_timeout=attempt, **kwargs
            )
        except psycopg.Error as exc:
            transient = is_transient_connect_failure(exc)
            left = deadline - _clock()
            if not transient:
                raise StoreUnreachableError(
                    f"open on {url}: cannot connect to the server ({reason(exc, conninfo)})",
                    url=url,
                ) from exc
            if left <= 0:
                raise StoreUnreachableError(
                    f"open on {url}: no connection to the server within {timeout_s:g} s"
                    f" ({reason(exc, conninfo)})",
                    url=url,
                ) from exc
            if not warned:
                # Once per open: a server that is restarting is worth one line, not one
                # per attempt (a logging warning, so an application decides where it goes).
                _log.warning(
                    "waiting up to %g s for the server at %s: %s",
                    timeout_s,
                    url,
                    reason(exc, conninfo),
                )
                warned = True
            await _pause(min(pause, left))
            pause = min(pause * 2, _LONGEST_PAUSE_S)


async def pool_timeout_error(
    pool: AsyncConnectionPool[Any], url: str, action: str, exc: PoolTimeout
) -> StoreError:
    """The error for a wait for a pooled connection that ran out (see the module
    docstring); the caller chains it with ``from``."""
    # The store's pool is built from a conninfo string and a kwargs dict (store.open).
    conninfo = cast(str, pool.conninfo)
    kwargs = cast("dict[str, Any]", pool.kwargs or {})
    try:
        probe = await psycopg.AsyncConnection.connect(
            conninfo, connect_timeout=PROBE_TIMEOUT_S, **kwargs
        )
    except psycopg.Error as failed:
        return StoreUnreachableError(
            f"{action} on {url}: no connection to the server in time ({reason(failed, conninfo)})",
            url=url,
        )
    await probe.close()
    # The server answers: every pooled connection stayed in use, or the pool is still
    # reconnecting after the server came back (psycopg_pool waits 1 s, 2 s, 4 s, ...
    # between attempts): either way a later call can succeed.
    return StoreBusyError(
        f"{action} on {url}: no pooled connection came free in time while the server"
        f" accepts connections: the pool is busy or still reconnecting ({reason(exc, conninfo)})",
        url=url,
    )
