"""Entries or a store: the two inputs every reference function accepts.

A list of branch entries (root first) gives the pure, synchronous path. A ``SessionStore``
with a ``session_id`` (and optional ``leaf_id``) gives the indexed path: the function
returns an awaitable that reads only what it needs through the store's memory queries
(``ledger()``, ``recent_messages()``, ...), so its cost follows the memory, not the
transcript. Both paths return identical results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from typing_extensions import TypeIs

from ..entries import validate_session_id
from ..errors import InvalidInputError

if TYPE_CHECKING:
    from ..stores.base import SessionStore

__all__ = ["is_store", "store_session"]


def is_store(value: Any) -> TypeIs[SessionStore]:
    """True for a session store (anything with the store's branch and ledger queries)."""
    return hasattr(value, "ledger") and hasattr(value, "branch") and hasattr(value, "append")


def store_session(session_id: str | None, function: str) -> str:
    """The session id a store-backed call needs, or a clear error naming the function."""
    if session_id is None:
        raise InvalidInputError(f"{function}() on a store needs session_id=...")
    return validate_session_id(session_id)
