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
nothing. The records' shape is one rule (``prism_om.core.tombstones``): every adapter's
append refuses a record that breaks it (``TombstoneRecordError``), and the read skips a
stored one that does (written by hand, or before the rule) with a
``MalformedTombstoneWarning`` naming its entry id, so every read keeps working.

Reasons: ``revoked`` and ``deleted`` withhold; ``corrected`` records that a source was
superseded but keeps it visible (the correction is new evidence, not a retraction). A
withholding tombstone is final: a later ``corrected`` for the same id does not lift it.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.projection import active_memory, invalidated_observation_ids
from ..core.records import ENTRY_ID_MAX_CHARS, OBSERVATIONS_DROPPED
from ..core.tombstones import (
    MAX_TOMBSTONE_IDS,
    TOMBSTONE_REASONS,
    TOMBSTONE_SESSION_PREFIX,
    TOMBSTONES_RECORDED,
    WITHHOLDING_REASONS,
    TombstoneReason,
    tombstone_record_problem,
    tombstone_scope,
)
from ..entries import SessionEntry, custom_entry, validate_session_id
from ..errors import (
    BranchMismatchError,
    InvalidIdError,
    InvalidInputError,
    MalformedTombstoneWarning,
)
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
    if not isinstance(reason, str) or reason not in TOMBSTONE_REASONS:
        raise InvalidInputError(
            f"reason must be one of {', '.join(TOMBSTONE_REASONS)}, got {reason!r:.80}"
        )
    return reason  # type: ignore[return-value]


def _check_ids(ids: Iterable[str]) -> list[str]:
    if isinstance(ids, str | bytes):
        # Iterating one id would tombstone each of its characters.
        raise InvalidInputError("ids must be a collection of ids, not one string")
    if not isinstance(ids, Iterable):
        raise InvalidInputError(f"ids must be a collection of ids, got {type(ids).__name__}")
    out: list[str] = []
    for item in ids:
        if not isinstance(item, str) or not item or len(item) > ENTRY_ID_MAX_CHARS:
            shown = repr(item)[:80] if isinstance(item, str) else f"of type {type(item).__name__}"
            raise InvalidIdError(f"tombstone id {shown} is not an entry or memory id")
        out.append(item)
    out = list(dict.fromkeys(out))
    if len(out) > MAX_TOMBSTONE_IDS:
        raise InvalidInputError(
            f"one propagation takes at most {MAX_TOMBSTONE_IDS} ids, got {len(out)}"
        )
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
    ``corrected`` ids are not returned (they stay visible). An entry that is no
    well-formed tombstone record (``prism_om.core.tombstones``) is skipped with a
    ``MalformedTombstoneWarning`` naming it: it withholds nothing, and the read goes on.
    """
    session_id = tombstone_session_id(scope)
    withheld: set[str] = set()
    for entry in await store.list(session_id):
        problem = tombstone_record_problem(entry)
        if problem is not None:
            _warn_skipped(store, entry, *problem)
            continue
        data = entry.data or {}
        if data["reason"] in WITHHOLDING_REASONS:
            withheld.update(data["ids"])
    return frozenset(withheld)


def _warn_skipped(store: SessionStore, entry: SessionEntry, field: str, why: str) -> None:
    warning = MalformedTombstoneWarning(
        f"skipped entry {entry.id!r} of tombstone session {entry.session_id!r} in "
        f"{store.url}: {field} {why}; it withholds nothing: record that revocation again "
        "with the deletion propagator",
        entry_id=entry.id,
        session_id=entry.session_id,
        url=store.url,
    )
    # stacklevel 3: the caller of list_invalidated_ids, where the read was asked for.
    warnings.warn(warning, stacklevel=3)


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
    By default, a ``tombstones.*`` session whose scope is no valid name (only a store
    written by hand holds one) is skipped with a ``MalformedTombstoneWarning``.
    """
    if isinstance(scopes, str | bytes):
        raise InvalidInputError("scopes must be a collection of scope names, not one string")
    if scopes is None:
        chosen = []
        for scope in await list_tombstone_scopes(store):
            if tombstone_scope(TOMBSTONE_SESSION_PREFIX + scope) is None:
                _warn_unreadable_session(store, TOMBSTONE_SESSION_PREFIX + scope)
            else:
                chosen.append(scope)
    else:
        chosen = list(scopes)
    withheld: set[str] = set()
    for scope in dict.fromkeys(chosen):
        withheld |= await list_invalidated_ids(store, scope)
    return frozenset(withheld)


def _warn_unreadable_session(store: SessionStore, session_id: str) -> None:
    warning = MalformedTombstoneWarning(
        f"skipped tombstone session {session_id!r} in {store.url}: no valid scope name "
        f"follows {TOMBSTONE_SESSION_PREFIX!r}, so it withholds nothing",
        session_id=session_id,
        url=store.url,
    )
    warnings.warn(warning, stacklevel=3)


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
