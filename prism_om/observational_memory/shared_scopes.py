"""Shared work scopes: read other sessions' memory bound to one scope, under owner grants.

``resolve_shared_scopes`` decides, for each declared scope, whether ``principal_id`` (the
reading session) may read it, and if so gathers the foreign memory bound to that exact
scope id:

1. the scope must be well formed and opened in the reader's own branch (``scope_map``);
2. the owner branch is read afresh on every call (no caching, so a revoke lands on the
   next resolve); an owner branch that cannot be read, or is empty, is *unreachable*;
3. grants come from the owner branch only; grants recorded in any other branch are inert;
   the owner itself is always allowed, any other principal needs a current grant;
4. the owner and every granted participant branch (except the reader's own) are folded
   separately, each is narrowed to the active memory bound to that scope id *in that
   branch*, and the results are united by id (``merge_observational_memory_ledgers``).
   Raw entry lists are never concatenated: coverage cursors and positions are per branch.

A grant is symmetric: a granted participant reads the owner and the other participants,
and the owner reads every granted participant. ``on_access(event)`` is called for every
decision, granted or denied. Denial reasons:

=======================  ===============================================================
``unknown``              the scope id is malformed or the reserved root
``not_opened_locally``   the reader's branch has not opened the scope
``unreachable``          the owner's branch could not be read, or was empty
``absent``               the owner's branch never opened the scope
``revoked``              the reader's grant was revoked
``not_granted``          the reader was never granted the scope
=======================  ===============================================================

Granted decisions carry reason ``owner`` or ``granted``. The local compaction payload is
built from the local ledger only, so foreign memory never enters it.

``shared_scope_block`` renders granted memory as the ``shared-work-scopes`` context
block; the attached context provider and ``om:view`` both use it, so the view shows what
the agent is shown.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..core.context_blocks import ContextBlock
from ..core.ledger import (
    ObservationalMemoryLedger,
    RecordedObservation,
    RecordedReflection,
    Supersession,
)
from ..core.projection import active_memory
from ..core.records import Observation, Reflection
from ..core.redaction import Redactor
from ..core.render import render_observational_memory
from ..core.scope_map import (
    ROOT_SCOPE_ID,
    WorkScopeMap,
    is_scope_id,
    memory_ref,
)
from ..entries import SessionEntry, validate_session_id
from ..tokens import TokenEstimator, get_estimator
from ._source import read_ledger_and_scopes

__all__ = [
    "AccessReason",
    "BranchEntries",
    "ScopeAccessEvent",
    "SharedScopeMemory",
    "SharedScopeSpec",
    "SharedScopes",
    "SHARED_BLOCK_NAME",
    "merge_observational_memory_ledgers",
    "resolve_shared_scopes",
    "shared_scope_block",
]

SHARED_BLOCK_NAME: Final = "shared-work-scopes"

AccessReason = Literal[
    "owner",
    "granted",
    "unknown",
    "not_opened_locally",
    "unreachable",
    "absent",
    "revoked",
    "not_granted",
]
BranchEntries = Callable[[str], Awaitable[Sequence[SessionEntry]]]
"""The host's ``entries(session_id)`` callback: one session's current branch."""


@dataclass(frozen=True)
class SharedScopeSpec:
    """A scope shared under ``owner_session_id``'s grants.

    ``entries`` is the host's tenant boundary: an async ``entries(session_id)`` callback
    returning a branch, or a ``SessionStore`` (its ``ledger()`` / ``scope_map()`` queries
    answer for each session's current leaf).
    """

    owner_session_id: str
    entries: BranchEntries | Any


@dataclass(frozen=True)
class ScopeAccessEvent:
    """One access decision, reported through ``on_access``."""

    scope_id: str
    principal_id: str
    granted: bool
    reason: AccessReason
    owner_session_id: str | None = None


@dataclass(frozen=True)
class SharedScopeMemory:
    """The foreign memory of one granted scope."""

    scope_id: str
    owner_session_id: str
    contributors: tuple[str, ...]
    """Sessions whose bound memory was read (the reader excluded), owner first."""
    ledger: ObservationalMemoryLedger
    """The merged, narrowed ledger (no coverage cursors: those are per branch)."""

    @property
    def observations(self) -> tuple[Observation, ...]:
        return tuple(r.observation for r in self.ledger.live_observations())

    @property
    def reflections(self) -> tuple[Reflection, ...]:
        superseded = self.ledger.superseded_by
        return tuple(r.reflection for r in self.ledger.reflections if r.id not in superseded)


@dataclass(frozen=True)
class SharedScopes:
    """Every decision of one resolve, and the memory of the granted scopes."""

    memory: Mapping[str, SharedScopeMemory]
    events: tuple[ScopeAccessEvent, ...]

    @property
    def ledger(self) -> ObservationalMemoryLedger:
        """All granted scopes' memory united by id (for recall and rendering)."""
        return merge_observational_memory_ledgers(m.ledger for m in self.memory.values())


def merge_observational_memory_ledgers(
    ledgers: Iterable[ObservationalMemoryLedger],
) -> ObservationalMemoryLedger:
    """Unite ledgers of different branches by memory id; the first record of an id wins.

    Coverage cursors and last-record ids are positional per branch, so the union has none.
    An observation dropped in any ledger stays dropped.
    """
    observations: dict[str, RecordedObservation] = {}
    reflections: dict[str, RecordedReflection] = {}
    dropped: dict[str, None] = {}
    superseded: dict[str, Supersession] = {}
    for ledger in ledgers:
        for s in ledger.supersessions:
            superseded.setdefault(s.reflection_id, s)
        for obs in ledger.observations:
            if obs.id not in observations and obs.id not in reflections:
                observations[obs.id] = obs
        for refl in ledger.reflections:
            if refl.id not in reflections and refl.id not in observations:
                reflections[refl.id] = refl
        dropped.update(dict.fromkeys(ledger.dropped_observation_ids))
    return ObservationalMemoryLedger(
        observations=tuple(observations.values()),
        reflections=tuple(reflections.values()),
        dropped_observation_ids=tuple(d for d in dropped if d in observations),
        supersessions=tuple(s for s in superseded.values() if s.reflection_id in reflections),
    )


def _bound_to(
    ledger: ObservationalMemoryLedger, scope_map: WorkScopeMap, scope_id: str
) -> ObservationalMemoryLedger:
    """The memory of one branch that is bound to exactly ``scope_id``.

    Dropped observations stay in, marked dropped (so no block shows them): exact recall
    judges the full ledger, and an observation the owner's revocation drop retired must
    answer "revoked" to a participant as it does to the owner, not "unknown".
    """
    scope = scope_map.scopes.get(scope_id)
    if scope is None:
        return ObservationalMemoryLedger()
    binds = frozenset(scope.binds)
    observations = tuple(o for o in ledger.observations if memory_ref("observation", o.id) in binds)
    kept = frozenset(o.id for o in observations)
    reflections = tuple(r for r in ledger.reflections if memory_ref("reflection", r.id) in binds)
    return ObservationalMemoryLedger(
        observations=observations,
        reflections=reflections,
        dropped_observation_ids=tuple(i for i in ledger.dropped_observation_ids if i in kept),
        # A shared reflection superseded on its branch is superseded for readers too.
        supersessions=tuple(
            s for s in ledger.supersessions if s.reflection_id in {r.id for r in reflections}
        ),
    )


async def _notify(
    on_access: Callable[[ScopeAccessEvent], object] | None, event: ScopeAccessEvent
) -> None:
    if on_access is None:
        return
    result = on_access(event)
    if inspect.isawaitable(result):
        await result


async def _resolve_one(
    scope_id: str, spec: SharedScopeSpec, principal_id: str, scope_map: WorkScopeMap
) -> tuple[ScopeAccessEvent, SharedScopeMemory | None]:
    owner = spec.owner_session_id

    def deny(reason: AccessReason) -> tuple[ScopeAccessEvent, None]:
        return ScopeAccessEvent(scope_id, principal_id, False, reason, owner), None

    if not is_scope_id(scope_id) or scope_id == ROOT_SCOPE_ID:
        return deny("unknown")
    if scope_id not in scope_map.scopes:
        return deny("not_opened_locally")
    owner_branch = await read_ledger_and_scopes(spec.entries, owner)
    if owner_branch is None:
        return deny("unreachable")
    owner_ledger, owner_map = owner_branch
    scope = owner_map.scopes.get(scope_id)
    if scope is None:
        return deny("absent")
    if principal_id == owner:
        reason: AccessReason = "owner"
    elif principal_id in scope.principals:
        reason = "granted"
    else:
        return deny("revoked" if principal_id in scope.revoked_principals else "not_granted")

    contributors: list[str] = []
    ledgers: list[ObservationalMemoryLedger] = []
    if principal_id != owner:
        contributors.append(owner)
        ledgers.append(_bound_to(owner_ledger, owner_map, scope_id))
    for participant in scope.principals:
        if participant in (principal_id, owner):
            continue
        branch = await read_ledger_and_scopes(spec.entries, participant)
        if branch is None:
            continue  # an unreachable participant contributes nothing; the owner decides
        contributors.append(participant)
        ledgers.append(_bound_to(*branch, scope_id))
    memory = SharedScopeMemory(
        scope_id, owner, tuple(contributors), merge_observational_memory_ledgers(ledgers)
    )
    return ScopeAccessEvent(scope_id, principal_id, True, reason, owner), memory


async def resolve_shared_scopes(
    *,
    scopes: Mapping[str, SharedScopeSpec],
    principal_id: str,
    scope_map: WorkScopeMap,
    on_access: Callable[[ScopeAccessEvent], object] | None = None,
) -> SharedScopes:
    """Check grants for every declared scope and gather the granted scopes' foreign memory.

    ``scope_map`` is the reader's own (``principal_id``'s) map. Costs one branch read and
    fold per participating branch, re-done on every call.
    """
    reader = validate_session_id(principal_id)
    memory: dict[str, SharedScopeMemory] = {}
    events: list[ScopeAccessEvent] = []
    for scope_id, spec in scopes.items():
        event, found = await _resolve_one(scope_id, spec, reader, scope_map)
        events.append(event)
        if found is not None:
            memory[scope_id] = found
        await _notify(on_access, event)
    return SharedScopes(memory, tuple(events))


def shared_scope_block(
    memory: Mapping[str, SharedScopeMemory],
    scope_map: WorkScopeMap,
    *,
    invalidated_ids: Iterable[str] = (),
    secrets: Iterable[str] | Redactor | None = None,
    estimator: TokenEstimator | None = None,
    lineage_only: bool = True,
) -> ContextBlock | None:
    """The ``shared-work-scopes`` block of granted memory, or None when it is empty.

    With ``lineage_only`` (what the agent is shown) only scopes in the reader's current
    scope lineage count; without it, every granted scope. Invalidated memory is withheld
    exactly as in the local memory block.
    """
    lineage = {scope_map.current, *scope_map.ancestors(scope_map.current)}
    invalid = frozenset(invalidated_ids)
    observations: list[Observation] = []
    reflections: list[Reflection] = []
    for scope_id, granted in memory.items():
        if lineage_only and scope_id not in lineage:
            continue
        obs, refl = active_memory(granted.ledger, invalid)
        observations.extend(r.observation for r in obs)
        reflections.extend(r.reflection for r in refl)
    if not observations and not reflections:
        return None
    text = render_observational_memory(reflections, observations, secrets=secrets)
    est = estimator or get_estimator()
    return ContextBlock(
        name=SHARED_BLOCK_NAME,
        text=text,
        tokens=est.count(text),
        entry_ids=(),
        memory_ids=tuple(r.id for r in reflections) + tuple(o.id for o in observations),
    )
