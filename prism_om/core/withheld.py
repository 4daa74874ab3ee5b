"""One way of withholding revoked memory, shared by every read path.

An invalidation set (``invalidated_ids``, usually from ``list_invalidated_ids``) names
entry ids and memory ids. Every read path withholds the same things for the same set:

* an observation whose own id or any ``sourceEntryIds`` is in the set, and a reflection
  whose own id is, that rests on such an observation, or that supersedes a withheld
  reflection (see :mod:`.projection`);
* a raw message whose entry id is in the set (branch pages, the recent-messages window).

A withheld item keeps its id (and, for a message, its role and timestamp) and loses every
piece of derived text: exact recall answers ``found: false, reason: "revoked"``, a page
message carries ``reason: "revoked"`` and no ``text`` / ``message``, and text output
shows ``[revoked]`` with the id. A merely *dropped* observation is not withheld.

``InvalidationSource`` lets a long-lived tool or command take either a fixed set or a
callable (sync or async) that it asks on every call, so a revocation that lands
mid-session is honoured on the next read without rebuilding anything.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, TypeAlias

from ..entries import SessionEntry
from ..errors import InvalidInputError
from .ledger import ObservationalMemoryLedger
from .projection import invalidated_observation_ids, withheld_reflection_ids

__all__ = [
    "REVOKED_MARKER",
    "REVOKED_REASON",
    "InvalidationSource",
    "check_invalidation_ids",
    "check_invalidation_source",
    "resolve_invalidation",
    "resolve_invalidation_sync",
    "withheld_memory_ids",
    "withheld_page_item",
    "withheld_page_message",
]

REVOKED_MARKER: Final = "[revoked]"
REVOKED_REASON: Final = "revoked"

InvalidationSource: TypeAlias = (
    Iterable[str] | Callable[[], "Awaitable[Iterable[str]] | Iterable[str]"] | None
)
"""A fixed invalidation set, or a callable returning the current one (sync or async)."""


def check_invalidation_source(source: object, *, name: str = "invalidated_ids") -> Any:
    """``source`` when it is None, a callable or a collection of ids (not one string).

    A fixed collection is copied now, so a caller mutating it later changes nothing.
    """
    if source is None or callable(source):
        return source
    if isinstance(source, str | bytes) or not isinstance(source, Iterable):
        raise InvalidInputError(
            f"{name} must be a collection of ids or a callable returning one, "
            f"got {type(source).__name__}",
            field=name,
        )
    return _checked_ids(source, name)


def check_invalidation_ids(ids: object, name: str = "invalidated_ids") -> frozenset[str]:
    """``ids`` as a frozenset of id strings; one string or a non-string id is refused."""
    return _checked_ids(ids, name)


def _checked_ids(ids: object, name: str) -> frozenset[str]:
    # ``name`` is the caller's argument, so every refusal names it as its ``field``.
    if isinstance(ids, str | bytes):
        # Iterating one id would withhold each of its characters.
        raise InvalidInputError(f"{name} must be a collection of ids, not one string", field=name)
    if not isinstance(ids, Iterable):
        # A callable source may return anything; frozenset() would raise a bare TypeError.
        raise InvalidInputError(
            f"{name} must be a collection of ids, got {type(ids).__name__}", field=name
        )
    items = tuple(ids)  # an iterator is read once
    bad = [i for i in items if not isinstance(i, str)]
    if bad:
        # Checked before hashing, so an unhashable id (a list) is refused the same way,
        # and a None among the ids is as wrong as any other non-string.
        raise InvalidInputError(
            f"{name} holds a {type(bad[0]).__name__}, not an id string", field=name
        )
    return frozenset(items)


async def resolve_invalidation(
    source: InvalidationSource, *, name: str = "invalidated_ids"
) -> frozenset[str]:
    """The current invalidation set of ``source`` (empty for None)."""
    if source is None:
        return frozenset()
    if callable(source):
        value = source()
        if inspect.isawaitable(value):
            value = await value
        return _checked_ids(value, name)
    return _checked_ids(source, name)


def resolve_invalidation_sync(
    source: InvalidationSource, *, name: str = "invalidated_ids"
) -> frozenset[str]:
    """The current set of ``source`` for a synchronous caller (a compaction strategy).

    An async source cannot be read here: its awaitable is closed and refused, never
    treated as "nothing revoked".
    """
    if source is None:
        return frozenset()
    if callable(source):
        value = source()
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            raise InvalidInputError(
                f"{name} returned an awaitable where a synchronous caller reads it: pass "
                "a set or a synchronous callable"
            )
        return _checked_ids(value, name)
    return _checked_ids(source, name)


def withheld_memory_ids(
    ledger: ObservationalMemoryLedger, invalidated_ids: Iterable[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Recorded observation and reflection ids the set withholds, in record order.

    Judged on the full ledger, dropped records included, like exact recall: a dropped
    observation that was also revoked is reported as revoked.
    """
    invalid = frozenset(invalidated_ids)
    if not invalid:
        return (), ()
    withheld = invalidated_observation_ids(ledger.observations, invalid) | invalid
    observations = tuple(r.id for r in ledger.observations if r.id in withheld)
    gone = withheld_reflection_ids(ledger, withheld)
    reflections = tuple(r.id for r in ledger.reflections if r.id in gone)
    return observations, reflections


def withheld_page_message(entry: SessionEntry) -> dict[str, Any]:
    """A page item for a revoked message: where it sits, never what it said."""
    role = entry.message.role if entry.message is not None else entry.kind
    return withheld_page_item(entry.id, role, entry.timestamp)


def withheld_page_item(entry_id: str, role: str, timestamp: str) -> dict[str, Any]:
    """``withheld_page_message`` from the message's id, role and timestamp alone."""
    return {"id": entry_id, "role": role, "timestamp": timestamp, "reason": REVOKED_REASON}
