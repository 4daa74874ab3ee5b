"""The cancellation rule of every adapter's writes: a write that has begun completes.

A task cancelled while it waits on a write would otherwise abandon it half-way: aiosqlite
keeps running the statement it was given, and a JSONL write keeps running in its thread,
so what the store holds would depend on where the cancellation landed. Instead the
write runs as its own task; the caller waits for it to finish (stored, or rejected with
nothing stored) and only then sees its ``CancelledError``, the way the Agents SDK
shields its session mutations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["finish_then_cancel"]

T = TypeVar("T")


async def finish_then_cancel(write: Coroutine[Any, Any, T]) -> T:
    """Await ``write`` to its end even when the caller is cancelled, then re-raise."""
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError as cancelled:
        # Further cancellations while waiting change nothing: the write still finishes.
        while not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                continue
            except BaseException:  # the caller asked to be cancelled, not for this error
                break
        if not task.cancelled():
            # Mark its outcome seen; the caller's cancellation is what it gets.
            task.exception()
        raise cancelled
