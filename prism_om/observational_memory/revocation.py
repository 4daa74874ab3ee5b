"""Revocation: tombstones, the deletion propagator, and the observational-memory drop leg.

A revoked source must stop feeding memory on both sides of the write, and both sides read
one tombstone set:

* **write path**: ``create_deletion_propagator(store, handlers)`` records the tombstones
  of one exact scope, then hands them to each handler;
  ``create_observational_memory_drop_handler(session=..., append_entry=...)`` is the
  memory leg: it appends one ``om.observations.dropped`` entry (observation ids only, no
  ``coversUpToId``: a tombstone set is not a worker's progress) naming every active
  observation whose id or any source id is tombstoned.
* **read path**: ``list_invalidated_ids(store, scope)`` returns the ids that scope
  withholds right now, for ``invalidated_ids=`` of the context blocks and of recall, so
  memory resting on a revoked source is withheld even before the drop ran.

Tombstones live in the store itself, so every adapter keeps them: custom entries of type
``prism.tombstones.recorded`` (outside the validated ``om.*`` namespace) chained in a
dedicated session ``tombstones.<scope>``. ``list_invalidated_ids`` reads every entry of
that session (``list()``, not one branch), so two writers that forked the chain lose
nothing.

Reasons: ``revoked`` and ``deleted`` withhold; ``corrected`` records that a source was
superseded but keeps it visible (the correction is new evidence, not a retraction). A
withholding tombstone is final: a later ``corrected`` for the same id does not lift it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

from ..core.projection import active_memory, invalidated_observation_ids
from ..core.records import ENTRY_ID_MAX_CHARS, OBSERVATIONS_DROPPED
from ..entries import SessionEntry, custom_entry, validate_session_id
from ..errors import BranchMismatchError, InvalidIdError, InvalidInputError
from ..session import stored_on_branch

if TYPE_CHECKING:
    from ..session import Session
    from ..stores.base import SessionStore

__all__ = [
    "TOMBSTONES_RECORDED",
    "TOMBSTONE_SESSION_PREFIX",
    "WITHHOLDING_REASONS",
    "AppendEntry",
    "DeletionHandler",
    "DeletionPropagator",
    "TombstoneReason",
    "TombstoneSet",
    "create_deletion_propagator",
    "create_observational_memory_drop_handler",
    "list_invalidated_ids",
    "list_store_invalidated_ids",
    "list_tombstone_scopes",
    "tombstone_session_id",
]

TOMBSTONES_RECORDED: Final = "prism.tombstones.recorded"
TOMBSTONE_SESSION_PREFIX: Final = "tombstones."
TombstoneReason = Literal["revoked", "deleted", "corrected"]
WITHHOLDING_REASONS: Final = frozenset({"revoked", "deleted"})
# One tombstone record names at most this many ids, so a record stays a sane entry size.
_MAX_IDS: Final = 4096

AppendEntry = Callable[[SessionEntry], Awaitable[Any]]
"""``async append_entry(entry)``, bound by the host to one store and session."""


@dataclass(frozen=True)
class TombstoneSet:
    """The ids one propagation tombstoned in one scope, and why."""

    scope: str
    ids: frozenset[str]
    reason: TombstoneReason
    entry_id: str | None = None
    """The ``prism.tombstones.recorded`` entry that persisted the set (None when empty)."""

    @property
    def withheld_ids(self) -> frozenset[str]:
        """The ids memory must stop using: all of them, unless the reason is ``corrected``."""
        return self.ids if self.reason in WITHHOLDING_REASONS else frozenset()


DeletionHandler = Callable[[TombstoneSet], Awaitable[Any]]


def tombstone_session_id(scope: str) -> str:
    """The session that holds ``scope``'s tombstones; the scope must be a safe name."""
    validate_session_id(scope)
    return validate_session_id(TOMBSTONE_SESSION_PREFIX + scope)


def _check_reason(reason: object) -> TombstoneReason:
    if reason not in get_args(TombstoneReason):
        raise InvalidInputError(
            f"reason must be one of {', '.join(get_args(TombstoneReason))}, got {reason!r}"
        )
    return reason  # type: ignore[return-value]


def _check_ids(ids: Iterable[str]) -> list[str]:
    if isinstance(ids, str | bytes):
        # Iterating one id would tombstone each of its characters.
        raise InvalidInputError("ids must be a collection of ids, not one string")
    out: list[str] = []
    for item in ids:
        if not isinstance(item, str) or not item or len(item) > ENTRY_ID_MAX_CHARS:
            raise InvalidIdError(f"tombstone id {item!r:.80} is not an entry or memory id")
        out.append(item)
    out = list(dict.fromkeys(out))
    if len(out) > _MAX_IDS:
        raise InvalidInputError(f"one propagation takes at most {_MAX_IDS} ids, got {len(out)}")
    return sorted(out)


class DeletionPropagator:
    """Records tombstones for a scope, then runs every registered handler on them."""

    def __init__(self, store: SessionStore, handlers: Sequence[DeletionHandler]) -> None:
        self.store = store
        self.handlers = tuple(handlers)
        for handler in self.handlers:
            if not callable(handler):
                raise InvalidInputError("every deletion handler must be callable")
        # Serialises this process's writes to a scope's chain (another process may still
        # fork it; the read side reads every entry, so nothing is lost).
        self._lock = asyncio.Lock()

    async def __call__(
        self, scope: str, ids: Iterable[str], *, reason: TombstoneReason
    ) -> TombstoneSet:
        return await self.propagate(scope, ids, reason=reason)

    async def propagate(
        self, scope: str, ids: Iterable[str], *, reason: TombstoneReason
    ) -> TombstoneSet:
        """Persist the tombstones, then call each handler in order.

        Every input is checked before anything is written. An empty ``ids`` writes nothing
        and calls no handler. A failing handler does not stop the ones after it; the first
        failure is re-raised once all ran (the tombstones are already durable, so the read
        path withholds regardless).
        """
        session_id = tombstone_session_id(scope)
        why = _check_reason(reason)
        chosen = _check_ids(ids)
        if not chosen:
            return TombstoneSet(scope, frozenset(), why)
        async with self._lock:
            entry = custom_entry(
                session_id,
                {"type": TOMBSTONES_RECORDED, "scope": scope, "reason": why, "ids": chosen},
                parent_id=await self.store.leaf(session_id),
            )
            await self.store.append(entry)
        tombstones = TombstoneSet(scope, frozenset(chosen), why, entry.id)
        failure: BaseException | None = None
        for handler in self.handlers:
            try:
                await handler(tombstones)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        return tombstones


def create_deletion_propagator(
    store: SessionStore, handlers: Sequence[DeletionHandler] = ()
) -> DeletionPropagator:
    """A propagator: ``await propagate(scope, ids, reason="revoked")``."""
    return DeletionPropagator(store, handlers)


async def list_invalidated_ids(store: SessionStore, scope: str) -> frozenset[str]:
    """The ids ``scope`` withholds now: every id of a ``revoked`` or ``deleted`` tombstone.

    One read of the scope's tombstone session; empty when the store holds none.
    ``corrected`` ids are not returned (they stay visible).
    """
    session_id = tombstone_session_id(scope)
    withheld: set[str] = set()
    for entry in await store.list(session_id):
        data = entry.data or {}
        if entry.custom_type != TOMBSTONES_RECORDED or data.get("scope") != scope:
            continue
        if data.get("reason") in WITHHOLDING_REASONS:
            withheld.update(i for i in data.get("ids", ()) if isinstance(i, str))
    return frozenset(withheld)


async def list_tombstone_scopes(store: SessionStore) -> list[str]:
    """Every scope that has tombstones in ``store``, in order of creation."""
    return [
        sid[len(TOMBSTONE_SESSION_PREFIX) :]
        for sid in await store.sessions()
        if sid.startswith(TOMBSTONE_SESSION_PREFIX)
    ]


async def list_store_invalidated_ids(
    store: SessionStore, scopes: Iterable[str] | None = None
) -> frozenset[str]:
    """The union of ``list_invalidated_ids`` over ``scopes``, or over every scope the
    store holds tombstones for (the default of readers outside the API: the CLI, an MCP
    server, an inspector, which withhold whatever any scope revoked).

    A named scope is validated like any scope name; one with no tombstones adds nothing.
    """
    if isinstance(scopes, str | bytes):
        raise InvalidInputError("scopes must be a collection of scope names, not one string")
    chosen = await list_tombstone_scopes(store) if scopes is None else list(scopes)
    withheld: set[str] = set()
    for scope in dict.fromkeys(chosen):
        withheld |= await list_invalidated_ids(store, scope)
    return frozenset(withheld)


def create_observational_memory_drop_handler(
    *, session: Session, append_entry: AppendEntry
) -> Callable[[TombstoneSet], Awaitable[SessionEntry | None]]:
    """The memory leg of a deletion propagator, bound to one session.

    Reads the session's ledger once (at its current leaf) and appends one
    ``om.observations.dropped`` entry, parent = that leaf, naming every active
    observation whose id or any ``sourceEntryIds`` is withheld by the tombstones.
    Appends nothing (returns None) when none matches. Afterwards the entry must be on the
    session's current branch with the content given, else ``BranchMismatchError``
    (``append_entry`` is bound elsewhere); later entries of other writers may follow it.
    """
    if not callable(append_entry):
        raise InvalidInputError("append_entry must be an async callable (entry) -> None")

    async def drop(tombstones: TombstoneSet) -> SessionEntry | None:
        withheld = tombstones.withheld_ids
        if not withheld:
            return None
        leaf = await session.leaf()
        if leaf is None:
            return None
        ledger = await session.store.ledger(session.id, leaf)
        active, _ = active_memory(ledger)
        hit = invalidated_observation_ids(active, withheld)
        ids = [r.id for r in active if r.id in hit]
        if not ids:
            return None
        # Observation ids only, and no coversUpToId: the fold then treats it as a drop,
        # not as dropper progress.
        entry = custom_entry(
            session.id, {"type": OBSERVATIONS_DROPPED, "observationIds": ids}, parent_id=leaf
        )
        await append_entry(entry)
        # Not "is it the leaf": a writer appending right after it (the next turn) is fine.
        stored = await stored_on_branch(session.store, entry)
        if stored is None:
            raise BranchMismatchError(
                f"drop entry {entry.id!r} did not land on the current branch of session "
                f"{session.id!r}: append_entry must append to this session's store",
                entry_id=entry.id,
                session_id=session.id,
                url=session.store.url,
            )
        return stored

    return drop
