"""Fast compaction: render the memory already recorded, with no model call.

``compact(entries, ...)`` returns one standard compaction entry whose parent is the last
supplied entry, whose summary is the rendered memory and whose ``data`` is::

    {throughEntryId, keepEntryIds, strategy: "observational-memory", trigger,
     memory: {type: "om.folded", version: 1, fullFold, observations, reflections,
              droppedObservationIds}}

``keepEntryIds`` is the request window's selection (``core.request_window``): every message
the observer has not covered yet and at least the last ``keep_recent_entries`` (the optional
``recent_message_max_tokens`` trims only covered ones), the same selection as the
recent-messages context block, so a compaction never folds away a message memory lacks;
the summary leaves out observations resting only on those kept messages, exactly as the
memory block does.

When the active observations exceed ``observations_pool_max_tokens``, or the folded
payload exceeds 512 KiB, the compaction is a *full fold* (``fullFold: true``): it trims
the least relevant observations (lowest priority, then oldest) until the pool fits the
token cap and the payload JSON fits 512 KiB, and lists the trimmed ids in
``droppedObservationIds``, which the fold treats as dropped from then on. When the payload
cannot fit even with every observation trimmed, it raises ``LimitExceededError``.
O(n) over the entries (plus sorting the pool); no provider call, no I/O.

Once the branch has host work scopes, the *summary* renders the work-scope projection
(current scope with its ancestors, under a Scope Outline), like the memory context block,
so the next run's prefix never carries the whole ledger; the folded payload still keeps
every active observation, so entering another scope can surface what the summary hid.
``scope_map`` defaults to the map folded from the entries.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.limits import FOLDED_PAYLOAD_MAX_BYTES, validate_limit
from ..core.projection import (
    build_observational_memory_projection_from_entries,
    is_visible_observation,
)
from ..core.recent_window import (
    DEFAULT_KEEP_RECENT_ENTRIES,
    check_keep_recent_entries,
    select_recent_message_entries_from_entries,
)
from ..core.records import COMPACTION_STRATEGY_NAME, FoldedMemory, Observation, Reflection
from ..core.redaction import Redactor
from ..core.relevance import lowest_relevance_order
from ..core.render import render_observational_memory
from ..core.request_window import select_request_window
from ..core.scope_map import WorkScopeMap, fold_work_scope_map
from ..core.withheld import (
    InvalidationSource,
    check_invalidation_source,
    resolve_invalidation_sync,
)
from ..core.work_memory import project_work_memory
from ..entries import SessionEntry, compaction_entry
from ..errors import InvalidInputError, LimitExceededError, SessionMismatchError
from ..tokens import TokenEstimator, get_estimator
from .folded import folded_payload_bytes, redact_memory_item

__all__ = [
    "DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS",
    "ObservationalMemoryCompaction",
    "ObservationalMemoryCompactionStrategy",
    "create_observational_memory_compaction_strategy",
]

DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS = 20_000
# JSON of one memory id inside droppedObservationIds: quotes plus 12 hex characters.
_DROPPED_ID_BYTES = 14


@dataclass(frozen=True)
class ObservationalMemoryCompaction:
    """What a compaction decided, before it becomes an entry."""

    through_entry_id: str
    keep_entry_ids: tuple[str, ...]
    summary: str
    memory: dict[str, Any]
    """The ``om.folded`` details (``data.memory``)."""
    trimmed_observation_ids: tuple[str, ...]
    pool_tokens: int
    """Tokens of the active observation pool before trimming."""

    @property
    def full_fold(self) -> bool:
        return bool(self.memory["fullFold"])


@dataclass(frozen=True)
class ObservationalMemoryCompactionStrategy:
    """A pure, synchronous compaction strategy over observational memory."""

    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES
    observations_pool_max_tokens: int = DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS
    recent_message_max_tokens: int | None = None
    estimator: TokenEstimator | None = None
    secrets: Redactor = field(default_factory=Redactor)
    invalidated_ids: InvalidationSource = frozenset()
    """Revoked ids: a collection, or a *synchronous* callable asked on every compaction
    (``compact`` is synchronous; ``attach`` reads an async source before each one)."""
    name: str = COMPACTION_STRATEGY_NAME

    def __post_init__(self) -> None:
        source = check_invalidation_source(self.invalidated_ids)
        if inspect.iscoroutinefunction(source):
            raise InvalidInputError(
                "the compaction strategy is synchronous: invalidated_ids must be a set of "
                "ids or a synchronous callable (attach() reads an async source for it)"
            )
        object.__setattr__(self, "invalidated_ids", source)
        check_keep_recent_entries(self.keep_recent_entries)
        validate_limit("observations_pool_max_tokens", self.observations_pool_max_tokens)
        if self.recent_message_max_tokens is not None:
            validate_limit("recent_message_max_tokens", self.recent_message_max_tokens)

    def plan(
        self, entries: Sequence[SessionEntry], *, scope_map: WorkScopeMap | None = None
    ) -> ObservationalMemoryCompaction:
        """Decide the summary, kept messages and folded memory for a branch (root first)."""
        if not entries:
            raise InvalidInputError("nothing to compact: the branch has no entries")
        est = self.estimator or get_estimator()
        invalid = self._invalidation()
        projection = build_observational_memory_projection_from_entries(
            entries, invalidated_ids=invalid
        )
        # The request window's rule: every message memory does not cover yet, and at least
        # the last keep_recent_entries; a revoked message is never kept verbatim.
        cover = projection.ledger.observation_covers_up_to_id
        start = 0 if cover is None else [e.id for e in entries].index(cover) + 1
        usable = [e for e in entries if e.id not in invalid] if invalid else list(entries)
        keep = select_request_window(
            [e for e in entries[start:] if e.id not in invalid],
            select_recent_message_entries_from_entries(usable, self.keep_recent_entries),
            self.keep_recent_entries,
            max_tokens=self.recent_message_max_tokens,
            estimator=est,
        ).selected
        red = self.secrets
        observations = [redact_memory_item(o, red) for o in projection.active_observations]
        reflections = [redact_memory_item(r, red) for r in projection.active_reflections]
        tokens = [est.count(o.text) for o in observations]
        pool_tokens = sum(tokens)

        trimmed = self._trim(observations, reflections, tokens)
        gone = set(trimmed)
        kept = [o for o in observations if o.id not in gone]
        full_fold = bool(trimmed) or pool_tokens > self.observations_pool_max_tokens
        folded = FoldedMemory(
            full_fold=full_fold,
            observations=kept,
            reflections=reflections,
            dropped_observation_ids=list(trimmed),
        )
        if folded_payload_bytes(folded) > FOLDED_PAYLOAD_MAX_BYTES:
            # _trim measures exactly; this guards its arithmetic, so a cap is never broken.
            raise LimitExceededError("folded memory payload exceeds 512 KiB after trimming")
        keep_ids = frozenset(e.id for e in keep)
        shown_reflections = reflections
        shown = [o for o in kept if is_visible_observation(o, keep_ids)]
        outline = None
        scopes = scope_map if scope_map is not None else fold_work_scope_map(entries)
        if scopes.has_host_scopes:
            scoped = project_work_memory(projection.ledger, scopes)
            in_scope = {o.id for o in scoped.observations} | {r.id for r in scoped.reflections}
            shown_reflections = [r for r in reflections if r.id in in_scope]
            shown = [o for o in shown if o.id in in_scope]
            outline = scoped.outline
        # Rendered from the unredacted records so each line is redacted exactly once, as
        # om:view renders it; the redacted copies above are what the payload stores.
        raw_obs = {o.id: o for o in projection.active_observations}
        raw_refl = {r.id: r for r in projection.active_reflections}
        summary = render_observational_memory(
            [raw_refl[r.id] for r in shown_reflections],
            [raw_obs[o.id] for o in shown],
            outline=outline,
            secrets=red,
        )
        return ObservationalMemoryCompaction(
            through_entry_id=entries[-1].id,
            keep_entry_ids=tuple(e.id for e in keep),
            summary=summary,
            memory=folded.model_dump(by_alias=True, mode="json"),
            trimmed_observation_ids=tuple(trimmed),
            pool_tokens=pool_tokens,
        )

    def _invalidation(self) -> frozenset[str]:
        return resolve_invalidation_sync(self.invalidated_ids)

    def _trim(
        self,
        observations: list[Observation],
        reflections: list[Reflection],
        tokens: list[int],
    ) -> list[str]:
        """Least relevant observations to trim so the pool and the payload fit their caps."""
        token_cap, byte_cap = self.observations_pool_max_tokens, FOLDED_PAYLOAD_MAX_BYTES
        # Measured exactly as folded_payload_bytes measures the whole payload.
        sizes = [
            folded_payload_bytes(o.model_dump(by_alias=True, mode="json")) for o in observations
        ]

        def payload_bytes(kept_bytes: int, n_kept: int, n_dropped: int, base: int) -> int:
            commas = max(n_kept - 1, 0) + max(n_dropped - 1, 0)
            return base + kept_bytes + n_dropped * _DROPPED_ID_BYTES + commas

        kept_bytes = sum(sizes)
        pool_tokens = sum(tokens)
        n = len(observations)
        base_partial = folded_payload_bytes(FoldedMemory(full_fold=False, reflections=reflections))
        if pool_tokens <= token_cap and payload_bytes(kept_bytes, n, 0, base_partial) <= byte_cap:
            return []
        # A full fold: "true" is one byte shorter than "false".
        base = folded_payload_bytes(FoldedMemory(full_fold=True, reflections=reflections))
        trimmed: list[str] = []
        for index in lowest_relevance_order(observations):
            fits_bytes = payload_bytes(kept_bytes, n, len(trimmed), base) <= byte_cap
            if pool_tokens <= token_cap and fits_bytes:
                return trimmed
            trimmed.append(observations[index].id)
            pool_tokens -= tokens[index]
            kept_bytes -= sizes[index]
            n -= 1
        if payload_bytes(kept_bytes, n, len(trimmed), base) <= byte_cap:
            return trimmed
        raise LimitExceededError(
            "the folded memory payload cannot fit 512 KiB even with every observation "
            f"trimmed: {len(reflections)} reflections alone take "
            f"{payload_bytes(0, 0, len(trimmed), base)} bytes"
        )

    def compact(
        self,
        entries: Sequence[SessionEntry],
        *,
        session_id: str,
        trigger: str = "manual",
        entry_id: str | None = None,
        timestamp: str | None = None,
        scope_map: WorkScopeMap | None = None,
    ) -> SessionEntry:
        """One compaction entry for the branch ``entries`` (root first), parented on its last."""
        if not isinstance(trigger, str) or not trigger:
            raise InvalidInputError(f"trigger must be a non-empty string, got {trigger!r}")
        if entries and entries[-1].session_id != session_id:
            raise SessionMismatchError(
                f"the branch belongs to session {entries[-1].session_id!r}, not {session_id!r}",
                entry_id=entries[-1].id,
                session_id=session_id,
            )
        plan = self.plan(entries, scope_map=scope_map)
        data: dict[str, Any] = {
            "throughEntryId": plan.through_entry_id,
            "keepEntryIds": list(plan.keep_entry_ids),
            "strategy": self.name,
            "trigger": trigger,
            "memory": plan.memory,
        }
        return compaction_entry(
            session_id,
            plan.summary,
            data,
            parent_id=plan.through_entry_id,
            entry_id=entry_id,
            timestamp=timestamp,
        )


def create_observational_memory_compaction_strategy(
    *,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    observations_pool_max_tokens: int = DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS,
    recent_message_max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
    secrets: Iterable[str] | None = None,
    invalidated_ids: InvalidationSource = None,
) -> ObservationalMemoryCompactionStrategy:
    """The observational-memory compaction strategy (validates its options now)."""
    return ObservationalMemoryCompactionStrategy(
        keep_recent_entries=keep_recent_entries,
        observations_pool_max_tokens=observations_pool_max_tokens,
        recent_message_max_tokens=recent_message_max_tokens,
        estimator=estimator,
        secrets=Redactor(secrets),
        invalidated_ids=invalidated_ids if invalidated_ids is not None else frozenset(),
    )
