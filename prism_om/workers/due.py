"""Which memory workers a flush would run, decided from a branch snapshot's counters.

Most turns run no worker: the messages since the observer's coverage are below
``observation.message_tokens`` and the memory is within its thresholds. A flush handed the
turn's ``BranchSnapshot`` asks here first and, when nothing is due, returns without a
single store read. Each check is the one the worker itself makes before it runs (same
inputs, same reasons), so the idle answer equals what the full flush would report; the
memory-side checks depend on the memory alone, so they are kept per memory head and cost
nothing until a worker records again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ..core.branch_snapshot import BranchSnapshot
from ..core.ledger import ObservationalMemoryLedger
from ..core.memory_budget import rendered_memory_tokens
from ..core.projection import active_memory, invalidated_observation_ids
from ..core.redaction import Redactor
from ..core.relevance import observation_pool_tokens
from ..observational_memory.coverage import observations_uncovered_by_reflection_from_entries
from ..observational_memory.settings import ObservationalMemorySettings
from ..tokens import TokenEstimator
from .consolidator import reflection_tokens
from .observer import pending_message_tokens

__all__ = ["MemoryDue", "WorkerDue"]

_KEPT: Final = 16


@dataclass(frozen=True, slots=True)
class MemoryDue:
    """The skip reason of each memory-side worker, or None where that worker is due."""

    reflector: str | None
    consolidator: str | None
    dropper: str | None


class WorkerDue:
    """The runtime's due checks over snapshots (one per runtime)."""

    def __init__(
        self,
        settings: ObservationalMemorySettings,
        estimator: Callable[[], TokenEstimator],
        redactor: Redactor,
    ) -> None:
        self._settings = settings
        self._estimator = estimator
        self._redactor = redactor
        self._kept: dict[tuple[object, ...], MemoryDue] = {}

    def observer(self, snapshot: BranchSnapshot, invalid: frozenset[str]) -> str | None:
        """``nothing_to_observe`` / ``below_threshold``, or None when the observer is due."""
        est = self._estimator()
        if not snapshot.tail_complete:
            return None  # more than a snapshot reads: far beyond any threshold
        if not invalid and snapshot.token_encoding == est.name:
            tokens = snapshot.pending_tokens
        else:
            tokens = pending_message_tokens([e for e in snapshot.tail if e.id not in invalid], est)
        if tokens == 0:
            return "nothing_to_observe"
        if tokens < self._settings.observation.message_tokens:
            return "below_threshold"
        return None

    def memory(self, snapshot: BranchSnapshot, invalid: frozenset[str]) -> MemoryDue:
        """The reflector's, consolidator's and dropper's checks (see their runtime steps)."""
        scoped = snapshot.scope_map.has_host_scopes
        key = (snapshot.session_id, snapshot.memory_head, scoped, invalid)
        kept = self._kept.get(key)
        if kept is not None:
            return kept
        found = self._check(snapshot, invalid, scoped)
        if len(self._kept) >= _KEPT:
            self._kept.pop(next(iter(self._kept)))
        self._kept[key] = found
        return found

    def _check(self, snapshot: BranchSnapshot, invalid: frozenset[str], scoped: bool) -> MemoryDue:
        est = self._estimator()
        settings = self._settings
        if invalid and not snapshot.full:
            # The workers judge a revocation on the whole ledger (``withholding_ledger``):
            # only a read of it can decide.
            return MemoryDue(None, None, None)
        ledger = snapshot.ledger
        reflector = self._reflector(ledger, invalid, scoped, est)
        if scoped:
            return MemoryDue(reflector, "host_scopes", "host_scopes")
        active_obs, active_refl = active_memory(ledger, invalid)
        reflections = [r.reflection for r in active_refl]
        consolidator = (
            "within_budget"
            if reflection_tokens(reflections, est) <= settings.reflection.budget_tokens
            else None
        )
        pool = rendered_memory_tokens(
            reflections,
            [r.observation for r in active_obs],
            estimator=est,
            secrets=self._redactor,
        )
        dropper = (
            "pool_within_limit" if pool <= settings.context.observations_pool_max_tokens else None
        )
        return MemoryDue(reflector, consolidator, dropper)

    def _reflector(
        self,
        live: ObservationalMemoryLedger,
        invalid: frozenset[str],
        scoped: bool,
        est: TokenEstimator,
    ) -> str | None:
        observations = observations_uncovered_by_reflection_from_entries(live)
        if invalid:
            withheld = invalidated_observation_ids(live.observations, invalid) | invalid
            observations = [o for o in observations if o.id not in withheld]
        if not observations:
            return "nothing_to_reflect"
        tokens = observation_pool_tokens(observations, est)
        if tokens >= self._settings.reflection.observation_tokens:
            return None
        if scoped:
            return "below_threshold"
        active_obs, active_refl = active_memory(live, invalid)
        pending_drop = (
            rendered_memory_tokens(
                [r.reflection for r in active_refl],
                [r.observation for r in active_obs],
                estimator=est,
                secrets=self._redactor,
            )
            > self._settings.context.observations_pool_max_tokens
        )
        return None if pending_drop else "below_threshold"
