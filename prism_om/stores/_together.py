"""Several reads of one store awaited as one unit (SQLite: one hop to its reader thread)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .base import SessionStore

T = TypeVar("T")

__all__ = ["point_reads_ready", "read_point", "read_together"]


async def read_together(store: SessionStore, reads: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``await reads()``, where ``reads`` awaits only ``store``'s reads and pure code.

    A store with a ``_read_together`` method runs the whole coroutine there (the SQLite
    store drives it on its reader's thread: one thread hop for all its reads instead of
    one each); any other store just awaits it.
    """
    together = getattr(store, "_read_together", None)
    if together is None:
        return await reads()
    result: T = await together(reads)
    return result


async def read_point(
    store: SessionStore, reads: Callable[[], Coroutine[Any, Any, T]], *, keys: int
) -> T:
    """``read_together``, for reads of rows by ``keys`` ids (a recall by id).

    A store with a ``_read_point`` method may run them without a thread hop (SQLite: on
    the event loop's own connection when ``keys`` is small, else with one hop;
    ``stores/sqlite/point``).
    """
    point = getattr(store, "_read_point", None)
    if point is None:
        return await read_together(store, reads)
    result: T = await point(reads, keys)
    return result


def point_reads_ready(store: SessionStore) -> bool:
    """Whether ``store`` can run ``read_point`` reads without a hop here and now."""
    ready = getattr(store, "_point_ready", None)
    return ready is not None and bool(ready())
