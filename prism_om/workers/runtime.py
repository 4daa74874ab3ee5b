"""``create_observational_memory_runtime``: the explicit flush of observe, reflect and drop.

One flush runs one consolidation pipeline:

1. **observe** once the unscanned eligible messages reach ``observation.message_tokens``
   (or ``force``): every unscanned entry is observed in chunks of at most
   ``observation.message_tokens`` message tokens (and one prompt's share of
   ``max_worker_message_bytes``), each its own run and request appending its own
   ``om.observations.recorded`` record with its coverage, so the newest messages are never
   left behind and a bulk import is observed as its live session would have been; a
   failing run loses only its own chunk: the chunks before it stay recorded and the next
   flush starts at the failed one;
2. **reflect** once the observations after the last reflection coverage reach
   ``reflection.observation_tokens`` (or ``force``; all active observations with
   ``full_reflection_rebuild``), or when the dropper is about to retire observations
   (step 5), so that what it drops has been reflected on; appending one
   ``om.reflections.recorded`` record;
3. **consolidate** when the active reflections' text exceeds ``reflection.budget_tokens``
   and the host has no scopes: one ``om.reflections.recorded`` record (no coverage) of
   reflections that supersede the oldest ones, down to half the budget (the reflector's
   model first when it has one, then a deterministic merge; see
   :mod:`.consolidator`); its outcome is the ``consolidator``'s;
4. **bind** the new observation and reflection ids to the current work scope with one
   ``om.scope.bound`` record, only when the host has opened scopes;
5. **drop** when the rendered memory (active reflections and observations, as the
   context block renders them) exceeds ``context.observations_pool_max_tokens`` and the
   host has no scopes, down to ``dropper.target_tokens``, appending one
   ``om.observations.dropped`` record. With the reflection budget below the target, every
   context build then shows at most ``observations_pool_max_tokens`` of memory.

Concurrency: one pipeline at a time per runtime. A ``flush()`` that starts while another is
running returns at once with ``status="skipped"`` and ``reason="in_flight"``; it never
waits, so a host turn is never held up by memory work.

Failures: a worker whose provider (or credential resolver) fails, or that breaks a limit,
does not raise out of ``flush``: its outcome is ``failed``, ``last_error`` holds the
redacted, bounded message, no record (so no coverage) is appended for that run, and the
next flush retries. A memory append that did not land on the session's current branch
with the content the runtime gave raises ``BranchMismatchError`` (a host wiring bug); the
leaf is restored only when the append moved it off the branch, never back over entries
appended after the runtime's own.

Concurrent workers (another runtime, another process): each worker run reads the
session's memory head (``SessionStore.memory_head``) before it reads the memory it works
on, and appends its record only while that head is unchanged, checked inside the store's
write lock (``expected_memory_head``, passed to ``append_entry`` when it accepts that
keyword, as ``Session.append`` does). A run that lost the race stores nothing and ends
``skipped`` with reason ``stale_coverage``; the next flush works from the new memory.

Oversized input: a message (or observation) larger than one prompt's share of
``max_worker_message_bytes`` is shown cut, with a marker naming the bytes left out, rather
than refused, because a refusal would stick coverage on it forever. The cut is never
silent: the worker's outcome lists it in ``truncated_ids``, the flush in ``warnings``, the
runtime in ``last_warning``, and an ``om.worker.input_truncated`` event names the ids.

A chunk that always fails (a content filter that refuses one message, say) must not block
every later chunk forever. The runtime counts consecutive failures of the chunk that starts
at the same unscanned entry: after ``CHUNK_FAILURES_BEFORE_SPLIT`` of them, each further
try there is half the message tokens of the one before, and the chunks after a smaller one
that succeeded keep the small size until one succeeds at full size again. Once the failing
chunk is a single message and still fails, that message is recorded as skipped: an
``om.observations.recorded`` record with no observations, ``coversUpToId`` and
``skippedEntryIds`` naming it, an ``om.observer.message_skipped`` warning event naming the
entry id, the outcome's ``skipped_ids`` and the flush's ``warnings``; the flush then goes
on with the next chunk. The count lives in the runtime (a long-lived host's, or one process
calling ``flush`` again); a single failure still loses only its own chunk.

A run whose every ``record_observations`` call was rejected (ids outside the chunk, bad
fields) still covers its chunk, as a model that saw nothing to record does, but it is not
silent: the outcome's ``rejected`` counts the refused calls, the flush's ``warnings`` says
so, and an ``om.observer.observations_rejected`` warning event names the coverage.

Building a runtime reads no store, resolves no credential and calls no provider.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..core.branch_snapshot import BranchSnapshot
from ..core.ledger import ObservationalMemoryLedger
from ..core.limits import MemoryWorkerLimits, resolve_memory_worker_limits
from ..core.memory_budget import drop_to_rendered_target, rendered_memory_tokens
from ..core.projection import active_memory, invalidated_observation_ids
from ..core.records import MEMORY_RECORD_TYPES, OBSERVATIONS_DROPPED, Observation
from ..core.redaction import Redactor
from ..core.relevance import observation_pool_tokens
from ..core.scope_map import SCOPE_BOUND
from ..core.sources import is_eligible_observation_source_entry, memory_tool_exchange_ids
from ..core.withheld import InvalidationSource, check_invalidation_source, resolve_invalidation
from ..debug import (
    APPEND_MISMATCH,
    DROPPER_TOPPED_UP,
    FLUSH_DONE,
    FLUSH_SKIPPED,
    FLUSH_START,
    MEMORY_APPENDED,
    OBSERVER_MESSAGE_SKIPPED,
    OBSERVER_OBSERVATIONS_REJECTED,
    PROVIDER_TEXT_SANITIZED,
    SCOPE_BOUND_EVENT,
    WORKER_COMPLETED,
    WORKER_FAILED,
    WORKER_INPUT_TRUNCATED,
    WORKER_SKIPPED,
    DebugEmitter,
    DebugSink,
)
from ..entries import SessionEntry, custom_entry
from ..errors import (
    BranchMismatchError,
    InvalidInputError,
    PrismMemoryError,
    StaleCoverageError,
)
from ..ids import create_memory_id
from ..observational_memory import observations_uncovered_by_reflection
from ..observational_memory.settings import (
    ObservationalMemorySettings,
    WorkerSettings,
    reject_removed_settings,
    resolve_observational_memory_settings,
)
from ..observational_memory.withholding import withholding_ledger
from ..observational_memory.worker_usage import UsageMeter, metering
from ..providers.base import (
    CredentialResolver,
    Provider,
    ProviderError,
    bound_error_text,
    sanitize_cache_key,
)
from ..session import Session, same_content, stored_on_branch
from ..stores.base import ANY_MEMORY_HEAD, AnyMemoryHead, check_memory_head
from ..tokens import TokenEstimator, get_estimator
from ._common import WorkerCall
from .consolidator import consolidate_reflections, reflection_tokens
from .dropper import drop_with_model
from .due import WorkerDue
from .loop import RequestSettings, WorkerRunError
from .model import Model, coerce_model
from .observer import ObserverResult, observe, pending_message_tokens
from .reflector import reflect

__all__ = [
    "AppendEntry",
    "DebugSink",
    "FlushResult",
    "ObservationalMemoryRuntime",
    "WorkerName",
    "WorkerOutcome",
    "create_observational_memory_runtime",
]

AppendEntry = Callable[..., Awaitable[Any]]
"""``async (entry) -> None``: the host's append, bound to the session's store and branch.

One that also takes ``expected_memory_head=`` (as ``Session.append`` does) lets the
store reject a worker record that another worker overtook, inside its write lock."""
WorkerName = Literal["observer", "reflector", "consolidator", "dropper"]

_log = logging.getLogger("prism_om.workers")

_SETTINGS_GROUP: Final[Mapping[WorkerName, str]] = {
    "observer": "observation",
    "reflector": "reflection",
    "dropper": "dropper",
}
"""The workers with settings of their own; the consolidator is the reflector's model."""

_GROUP_KEYS: Final = frozenset(
    {"thinkingLevel", "thinking_level", "requireExplicitModel", "require_explicit_model"}
)

_OVERRIDE_NAMES: Final[Mapping[str, str]] = {
    "thinking_level": "thinking_level",
    "thinkingLevel": "thinking_level",
    "correlation_id": "correlation_id",
    "correlationId": "correlation_id",
    "session_id": "correlation_id",
    "sessionId": "correlation_id",
    "max_output_tokens": "max_output_tokens",
    "maxOutputTokens": "max_output_tokens",
}


@dataclass(frozen=True, slots=True)
class WorkerOutcome:
    """What one worker did in a flush.

    ``status`` is ``"ran"``, ``"skipped"`` or ``"failed"``. Skip reasons:
    ``missing_provider``, ``missing_model``, ``missing_credential``, ``nothing_to_observe``,
    ``nothing_to_reflect``, ``below_threshold``, ``host_scopes``, ``pool_within_limit``,
    ``within_budget`` (consolidator),
    ``stale_coverage`` (another worker recorded first; nothing of this run was stored).
    A failure's ``reason`` is the ``WorkerRunError`` reason (``provider_error``,
    ``tool_calls``, ...) or ``credential_error``.
    """

    worker: WorkerName
    status: Literal["ran", "skipped", "failed"]
    reason: str | None = None
    entry_ids: tuple[str, ...] = ()
    memory_ids: tuple[str, ...] = ()
    """Observation ids recorded, reflection ids recorded, or observation ids dropped."""
    runs: int = 0
    turns: int = 0
    tool_calls: int = 0
    error: str | None = None
    truncated_ids: tuple[str, ...] = ()
    """Inputs too large for one prompt, shown cut with a marker rather than refused (a
    refusal would stick coverage on them forever): message entry ids for the observer,
    observation ids for the reflector."""
    skipped_ids: tuple[str, ...] = ()
    """Observer: messages that failed alone run after run, covered without being observed."""
    rejected: int = 0
    """Observer: ``record_observations`` calls refused in runs that recorded nothing."""


@dataclass(frozen=True, slots=True)
class FlushResult:
    """The outcome of one ``flush()``.

    ``status`` is ``"completed"`` (every worker ran or was skipped), ``"failed"`` (at least
    one worker failed; see ``error``) or ``"skipped"`` (``reason="in_flight"``).
    """

    status: Literal["completed", "failed", "skipped"]
    reason: str | None = None
    outcomes: tuple[WorkerOutcome, ...] = ()
    observation_ids: tuple[str, ...] = ()
    reflection_ids: tuple[str, ...] = ()
    dropped_observation_ids: tuple[str, ...] = ()
    entry_ids: tuple[str, ...] = ()
    """Every entry this flush appended, in order."""
    error: str | None = None
    warnings: tuple[str, ...] = ()
    """What the flush did not do whole: inputs cut to fit a prompt (see ``last_warning``)."""

    def outcome(self, worker: WorkerName) -> WorkerOutcome | None:
        return next((o for o in self.outcomes if o.worker == worker), None)


@dataclass(frozen=True, slots=True)
class _Worker:
    name: WorkerName
    settings: WorkerSettings
    provider: Provider | None
    model: Model | None


@dataclass
class _Ready:
    call: WorkerCall | None = None
    skip: str | None = None
    error: str | None = None


@dataclass
class _Progress:
    outcomes: list[WorkerOutcome] = field(default_factory=list)
    entry_ids: list[str] = field(default_factory=list)


class ObservationalMemoryRuntime:
    """The worker runtime of one session. Build it with
    :func:`create_observational_memory_runtime`."""

    def __init__(
        self,
        *,
        session: Session,
        append_entry: AppendEntry,
        settings: ObservationalMemorySettings,
        limits: MemoryWorkerLimits,
        workers: Mapping[WorkerName, _Worker],
        session_model: object,
        credential_resolver: CredentialResolver | None,
        redactor: Redactor,
        debug: DebugSink | None,
        request: RequestSettings,
        thinking_override: str | None,
        estimator: TokenEstimator | None,
        invalidated_ids: InvalidationSource = None,
    ) -> None:
        self.session = session
        self._invalidation = invalidated_ids
        # Tokens the workers spent, written with the next memory record
        # (observational_memory.worker_usage).
        self._meter = UsageMeter()
        self._worker: WorkerName = "observer"
        self.settings = settings
        self.limits = limits
        self._append_entry = append_entry
        self._append_takes_head = _takes_keyword(append_entry, "expected_memory_head")
        # The default callback, ``session.append`` of this very session: it returns the
        # entry as the store placed it at the leaf, so that answer is checked, not re-read.
        self._session_append = getattr(append_entry, "__self__", None) is session and (
            getattr(append_entry, "__func__", None) is Session.append
        )
        self._workers = dict(workers)
        self._session_model = session_model
        self._resolver = credential_resolver
        self._redactor = redactor
        self._debug = DebugEmitter(
            debug, redactor, trace=settings.debug_log, on_error=self._record_error
        )
        self._request = request
        self._thinking_override = thinking_override
        self._estimator_value = estimator
        self._in_flight = False
        self._last_error: str | None = None
        self._last_warning: str | None = None
        self._stuck: _StuckChunk | None = None
        self._due = WorkerDue(settings, self._estimator, redactor)

    @property
    def in_flight(self) -> bool:
        """True while a flush pipeline runs."""
        return self._in_flight

    @property
    def last_error(self) -> str | None:
        """The latest worker failure (redacted, bounded); cleared by a clean flush."""
        return self._last_error

    @property
    def last_warning(self) -> str | None:
        """The latest flush's warning (an input cut to fit a prompt), redacted and bounded;
        cleared by a flush without one."""
        return self._last_warning

    @property
    def correlation_id(self) -> str | None:
        return self._request.correlation_id

    def worker_model(self, worker: WorkerName) -> Model | None:
        """The model ``worker`` would use (its own, else the session model)."""
        spec = self._workers[worker]
        if spec.model is not None:
            return spec.model
        if spec.settings.require_explicit_model:
            return None
        provider_id = getattr(spec.provider, "provider_id", None)
        return coerce_model(self._session_model, default_provider=provider_id)

    # -- flush ------------------------------------------------------------------------

    async def flush(
        self,
        *,
        full_reflection_rebuild: bool = False,
        force: bool = False,
        force_observer: bool = False,
        snapshot: BranchSnapshot | None = None,
        invalidated: frozenset[str] | None = None,
    ) -> FlushResult:
        """Observe, reflect, bind and drop as their thresholds say (``force``: ignore the
        observe/reflect thresholds; ``force_observer``: the observer's alone). Returns at
        once, skipped, while another flush runs.

        ``snapshot``: the branch as the caller last saw it (``SessionStore.snapshot``, or
        advanced by what the caller appended since); when its counters say no worker is
        due, the flush returns with what every worker's own check would report, without
        reading the store. ``invalidated``: the invalidation set the caller resolved for
        this turn (else the runtime's source is asked once).
        """
        if self._in_flight:
            self._emit(FLUSH_SKIPPED, {"reason": "in_flight"})
            return FlushResult("skipped", reason="in_flight")
        self._in_flight = True
        try:
            return await self._flush(
                full_reflection_rebuild, force, force_observer, snapshot, invalidated
            )
        finally:
            self._in_flight = False

    async def _flush(
        self,
        full_rebuild: bool,
        force: bool,
        force_observer: bool,
        snapshot: BranchSnapshot | None,
        invalidated: frozenset[str] | None,
    ) -> FlushResult:
        self._emit(FLUSH_START, {"force": force, "fullReflectionRebuild": full_rebuild})
        progress = _Progress()
        # Asked once per flush, so a revocation that lands mid-session stops feeding
        # memory from the next flush on (spec: "Revocation wiring").
        if invalidated is None:
            invalid = await resolve_invalidation(self._invalidation)
        else:
            invalid = invalidated
        forced = force or force_observer or full_rebuild
        if snapshot is not None and not forced and self._idle(snapshot, invalid, progress):
            return self._finish(progress, _NOT_RUN, _NOT_RUN, _NOT_RUN, _NOT_RUN)
        # Every worker turn is metered and its usage written with the record
        # (observational_memory.worker_usage).
        with metering(self._meter):
            self._worker = "observer"
            observed = await self._observe(force or force_observer, progress, invalid)
            # One read of the scope map for the steps that skip under host scopes.
            scoped = (await self.session.store.scope_map(self.session.id)).has_host_scopes
            self._worker = "reflector"
            reflected = await self._reflect(force, full_rebuild, progress, invalid, scoped)
            self._worker = "consolidator"
            consolidated = await self._consolidate(progress, invalid, scoped)
            await self._bind([*observed.memory_ids], [*reflected.memory_ids], progress)
            self._worker = "dropper"
            dropped = await self._drop(progress, invalid)
        return self._finish(progress, observed, reflected, consolidated, dropped)

    def _idle(self, snapshot: BranchSnapshot, invalid: frozenset[str], progress: _Progress) -> bool:
        """Record every worker's skip and return True when the snapshot says none is due;
        else record nothing and return False (the full flush then decides, reading)."""
        workers = self._workers
        observer = (
            "missing_provider"
            if workers["observer"].provider is None
            else self._due.observer(snapshot, invalid)
        )
        if observer is None:
            return False
        memory = self._due.memory(snapshot, invalid)
        reflector = (
            "missing_provider" if workers["reflector"].provider is None else memory.reflector
        )
        if reflector is None or memory.consolidator is None or memory.dropper is None:
            return False
        self._record(progress, WorkerOutcome("observer", "skipped", observer))
        self._record(progress, WorkerOutcome("reflector", "skipped", reflector))
        self._record(progress, WorkerOutcome("consolidator", "skipped", memory.consolidator))
        self._record(progress, WorkerOutcome("dropper", "skipped", memory.dropper))
        return True

    def _finish(
        self,
        progress: _Progress,
        observed: WorkerOutcome,
        reflected: WorkerOutcome,
        consolidated: WorkerOutcome,
        dropped: WorkerOutcome,
    ) -> FlushResult:
        failures = [o for o in progress.outcomes if o.status == "failed"]
        if failures:
            self._last_error = failures[-1].error
        else:
            self._last_error = None
        warnings = tuple(w for o in progress.outcomes for w in self._warnings(o))
        self._last_warning = warnings[-1] if warnings else None
        result = FlushResult(
            "failed" if failures else "completed",
            outcomes=tuple(progress.outcomes),
            observation_ids=observed.memory_ids,
            reflection_ids=reflected.memory_ids + consolidated.memory_ids,
            dropped_observation_ids=dropped.memory_ids,
            entry_ids=tuple(progress.entry_ids),
            error=failures[-1].error if failures else None,
            warnings=warnings,
        )
        self._emit(
            FLUSH_DONE,
            {
                "status": result.status,
                "observations": len(result.observation_ids),
                "reflections": len(result.reflection_ids),
                "dropped": len(result.dropped_observation_ids),
                "entries": list(result.entry_ids),
            },
        )
        return result

    def _warnings(self, outcome: WorkerOutcome) -> list[str]:
        found = [self._truncation_warning(outcome)] if outcome.truncated_ids else []
        if outcome.skipped_ids:
            found.append(
                self._error(
                    f"observer: {len(outcome.skipped_ids)} message(s) failed alone "
                    f"{CHUNK_FAILURES_BEFORE_SPLIT} times or more and were skipped, never "
                    f"observed: {', '.join(outcome.skipped_ids)}"
                )
            )
        if outcome.rejected:
            found.append(
                f"observer: {outcome.rejected} record_observations call(s) were rejected in "
                "runs that recorded nothing; their chunks are covered without observations"
            )
        return found

    def _truncation_warning(self, outcome: WorkerOutcome) -> str:
        what = "message" if outcome.worker == "observer" else "observation"
        ids = ", ".join(outcome.truncated_ids)
        return self._error(
            f"{outcome.worker}: {len(outcome.truncated_ids)} {what}(s) larger than one prompt "
            f"(max_worker_message_bytes={self.limits.max_worker_message_bytes}) were shown "
            f"cut, with a marker: {ids}"
        )

    def _record(self, progress: _Progress, outcome: WorkerOutcome) -> WorkerOutcome:
        progress.outcomes.append(outcome)
        if outcome.status == "failed":
            # No record carries a failed run: its tokens ride on the next one written.
            self._meter.failed(outcome.worker)
        if outcome.truncated_ids:
            # A cut is never silent: the host hears which inputs the worker saw only in part.
            self._emit(
                WORKER_INPUT_TRUNCATED,
                {"worker": outcome.worker, "ids": list(outcome.truncated_ids)},
            )
        if outcome.status == "skipped":
            self._emit(WORKER_SKIPPED, {"worker": outcome.worker, "reason": outcome.reason})
        elif outcome.status == "failed":
            self._emit(
                WORKER_FAILED,
                {"worker": outcome.worker, "reason": outcome.reason, "error": outcome.error},
            )
        else:
            self._emit(
                WORKER_COMPLETED,
                {
                    "worker": outcome.worker,
                    "runs": outcome.runs,
                    "turns": outcome.turns,
                    "toolCalls": outcome.tool_calls,
                    "memoryIds": list(outcome.memory_ids),
                    "entryIds": list(outcome.entry_ids),
                },
            )
        return outcome

    async def _observe(
        self, force: bool, progress: _Progress, invalid: frozenset[str] = frozenset()
    ) -> WorkerOutcome:
        spec = self._workers["observer"]
        if spec.provider is None:
            return self._record(progress, WorkerOutcome("observer", "skipped", "missing_provider"))
        store, sid = self.session.store, self.session.id
        # Read before the memory it stands for, so a record that lands in between makes
        # this run stale rather than a duplicate.
        head = await store.memory_head(sid)
        # The live ledger carries the coverage cursors; the full one is read only when a
        # worker runs and needs every id ever minted on the branch.
        live = await store.live_ledger(sid)
        entries = await store.entries_after(sid, live.observation_covers_up_to_id)
        tokens = pending_message_tokens(_unrevoked(entries, invalid), self._estimator())
        if tokens == 0:
            return self._record(
                progress, WorkerOutcome("observer", "skipped", "nothing_to_observe")
            )
        if not force and tokens < self.settings.observation.message_tokens:
            return self._record(progress, WorkerOutcome("observer", "skipped", "below_threshold"))
        ready = await self._ready(spec)
        if ready.call is None:
            return self._not_ready(progress, "observer", ready)
        # New ids must avoid every id of the branch: the live ones here, the dropped and
        # superseded ones by an indexed check of what the run minted (_claimed).
        taken = _memory_ids(live)
        # The memory tools' own exchanges are covered, never shown (core.sources), judged
        # over the whole run so a chunk boundary between a call and its answer changes
        # nothing.
        hidden = invalid | memory_tool_exchange_ids(entries)
        ids: list[str] = []
        entry_ids: list[str] = []
        truncated: list[str] = []
        skipped: list[str] = []
        runs = turns = calls = rejected = 0
        while entries:
            start = entries[0].id
            limit = self._chunk_tokens(start)
            shown: list[str] = []
            try:
                result = await observe(
                    ready.call,
                    entries,
                    taken_ids=taken,
                    withheld=hidden,
                    max_message_tokens=limit,
                    estimator=self._estimator(),
                    shown=shown,
                )
            except WorkerRunError as exc:
                # A transient failure (an outage) fails the flush without counting towards
                # the split: only a failure that repeats for this content splits or skips.
                skip = None if _transient(exc) else self._chunk_failed(start, limit, shown)
                if skip is None:
                    return self._record(
                        progress,
                        WorkerOutcome(
                            "observer",
                            "failed",
                            exc.reason,
                            tuple(entry_ids),
                            tuple(ids),
                            runs,
                            turns,
                            calls,
                            self._error(exc.message),
                            tuple(truncated),
                            tuple(skipped),
                            rejected,
                        ),
                    )
                result = _skipped(entries, skip)
            renamed = await self._claimed([o.id for o in result.observations], taken)
            if renamed:
                result = dataclasses.replace(
                    result,
                    observations=tuple(
                        o.model_copy(update={"id": renamed.get(o.id, o.id)})
                        for o in result.observations
                    ),
                )
            truncated.extend(result.truncated_ids)
            if result.covers_up_to_id is None:
                break
            try:
                entry = await self._append(result.record(), progress, head)
            except StaleCoverageError:
                if runs:
                    break
                return self._record(
                    progress, WorkerOutcome("observer", "skipped", "stale_coverage")
                )
            following = entries[result.scanned].id if result.scanned < len(entries) else None
            if result.run is None:
                skipped.append(result.covers_up_to_id)
                self._emit(
                    OBSERVER_MESSAGE_SKIPPED,
                    {"entryId": result.covers_up_to_id, "recordId": entry.id},
                )
            else:
                self._chunk_done(start, limit, following)
            if result.rejected and not result.observations:
                rejected += result.rejected
                self._emit(
                    OBSERVER_OBSERVATIONS_REJECTED,
                    {"coversUpToId": result.covers_up_to_id, "rejected": result.rejected},
                )
            head = entry.id
            entry_ids.append(entry.id)
            ids.extend(o.id for o in result.observations)
            taken.update(o.id for o in result.observations)
            runs += 1
            if result.run is not None:
                turns += result.run.turns
                calls += result.run.tool_calls
            entries = entries[result.scanned :]
            # Not a token count of the rest: that would tokenize the backlog once per chunk.
            if not _has_message(entries, invalid):
                break
        return self._record(
            progress,
            WorkerOutcome(
                "observer",
                "ran",
                None,
                tuple(entry_ids),
                tuple(ids),
                runs,
                turns,
                calls,
                truncated_ids=tuple(truncated),
                skipped_ids=tuple(skipped),
                rejected=rejected,
            ),
        )

    def _chunk_tokens(self, start: str) -> int:
        """The message tokens of the chunk starting at ``start``: smaller once it has failed
        ``CHUNK_FAILURES_BEFORE_SPLIT`` times in a row."""
        stuck = self._stuck
        if (
            stuck is not None
            and stuck.start_id == start
            and stuck.failures >= (CHUNK_FAILURES_BEFORE_SPLIT)
        ):
            return stuck.tokens
        return self.settings.observation.message_tokens

    def _chunk_failed(self, start: str, tokens: int, shown: Sequence[str]) -> str | None:
        """Count a failure of the chunk at ``start``; the id of its one message when that
        message is to be skipped, else None (the flush fails; the next one retries)."""
        stuck = self._stuck
        if stuck is None or stuck.start_id != start:
            stuck = _StuckChunk(start, 0, tokens)
        stuck.failures += 1
        self._stuck = stuck
        if stuck.failures >= CHUNK_FAILURES_BEFORE_SPLIT:
            if len(shown) == 1:
                self._stuck = None
                return shown[0]
            stuck.tokens = max(1, tokens // 2)
        return None

    def _chunk_done(self, start: str, tokens: int, following: str | None) -> None:
        """A chunk at ``start`` was recorded: a smaller one hands its size on (doubled) to
        the next chunk, which one more failure halves again; a full one clears the count."""
        stuck = self._stuck
        if stuck is None or stuck.start_id != start:
            return
        doubled = tokens * 2
        full = self.settings.observation.message_tokens
        if following is None or doubled >= full or stuck.failures < CHUNK_FAILURES_BEFORE_SPLIT:
            self._stuck = None
            return
        self._stuck = _StuckChunk(following, CHUNK_FAILURES_BEFORE_SPLIT, doubled)

    async def _reflect(
        self,
        force: bool,
        full_rebuild: bool,
        progress: _Progress,
        invalid: frozenset[str] = frozenset(),
        scoped: bool = False,
    ) -> WorkerOutcome:
        spec = self._workers["reflector"]
        if spec.provider is None:
            return self._record(progress, WorkerOutcome("reflector", "skipped", "missing_provider"))
        store, sid = self.session.store, self.session.id
        head = await store.memory_head(sid)
        # Without a revocation the live ledger, which a turn can afford, has the same
        # active memory and coverage; with one, what _drop_pending counts must be judged
        # on the full ledger (a reflection may rest on a dropped, revoked observation).
        ledger = await withholding_ledger(store, sid, invalid)
        observations: list[Observation]
        if full_rebuild:
            observations = [r.observation for r in active_memory(ledger, invalid)[0]]
        else:
            observations = observations_uncovered_by_reflection(ledger)
        if invalid:
            # A revoked observation's text never reaches the reflector.
            withheld = invalidated_observation_ids(ledger.observations, invalid) | invalid
            observations = [o for o in observations if o.id not in withheld]
        if not observations:
            return self._record(
                progress, WorkerOutcome("reflector", "skipped", "nothing_to_reflect")
            )
        tokens = observation_pool_tokens(observations, self._estimator())
        if (
            not force
            and tokens < self.settings.reflection.observation_tokens
            and (scoped or not self._drop_pending(ledger, invalid))
        ):
            return self._record(progress, WorkerOutcome("reflector", "skipped", "below_threshold"))
        ready = await self._ready(spec)
        if ready.call is None:
            return self._not_ready(progress, "reflector", ready)
        taken = _memory_ids(ledger)
        leaf = await store.leaf(sid)
        try:
            result = await reflect(ready.call, observations, covers_up_to_id=leaf, taken_ids=taken)
        except WorkerRunError as exc:
            return self._record(
                progress,
                WorkerOutcome("reflector", "failed", exc.reason, error=self._error(exc.message)),
            )
        renamed = await self._claimed([r.id for r in result.reflections], taken)
        if renamed:
            result = dataclasses.replace(
                result,
                reflections=tuple(
                    r.model_copy(update={"id": renamed.get(r.id, r.id)}) for r in result.reflections
                ),
            )
        try:
            entry = await self._append(result.record(), progress, head)
        except StaleCoverageError:
            return self._record(progress, WorkerOutcome("reflector", "skipped", "stale_coverage"))
        return self._record(
            progress,
            WorkerOutcome(
                "reflector",
                "ran",
                None,
                (entry.id,),
                tuple(r.id for r in result.reflections),
                len(result.runs),
                sum(r.turns for r in result.runs),
                sum(r.tool_calls for r in result.runs),
                truncated_ids=result.truncated_ids,
            ),
        )

    def _drop_pending(self, ledger: ObservationalMemoryLedger, invalid: frozenset[str]) -> bool:
        """Whether this flush's dropper will retire observations (no host scopes): the
        reflector then reflects the unreflected ones first, so that what is dropped was
        summarised."""
        observations, reflections = active_memory(ledger, invalid)
        tokens = rendered_memory_tokens(
            [r.reflection for r in reflections],
            [r.observation for r in observations],
            estimator=self._estimator(),
            secrets=self._redactor,
        )
        return tokens > self.settings.context.observations_pool_max_tokens

    async def _consolidate(
        self, progress: _Progress, invalid: frozenset[str] = frozenset(), scoped: bool = False
    ) -> WorkerOutcome:
        store, sid = self.session.store, self.session.id
        if scoped:
            # Like the dropper: a scoped working set is the host's to curate, and a merge
            # would carry memory across the scopes it is bound to.
            return self._record(progress, WorkerOutcome("consolidator", "skipped", "host_scopes"))
        head = await store.memory_head(sid)
        # A revocation must see the full ledger: a reflection superseded by a withheld one
        # is active again, and must be counted (and may be merged) as such.
        ledger = await withholding_ledger(store, sid, invalid)
        active = [r.reflection for r in active_memory(ledger, invalid)[1]]
        est = self._estimator()
        budget = self.settings.reflection.budget_tokens
        if reflection_tokens(active, est) <= budget:
            return self._record(progress, WorkerOutcome("consolidator", "skipped", "within_budget"))
        spec = self._workers["reflector"]
        call = None
        if spec.provider is not None:
            call = (await self._ready(spec)).call
        # New ids must be new on the branch: checked by id below (an indexed read), not
        # by reading every memory id ever recorded.
        taken = {r.id for r in ledger.observations} | {r.id for r in ledger.reflections}
        error = None
        try:
            result = await consolidate_reflections(
                active, budget_tokens=budget, taken_ids=taken, call=call, estimator=est
            )
        except WorkerRunError as exc:
            # The budget is a promise the deterministic merge keeps without a model.
            error = self._error(exc.message)
            result = await consolidate_reflections(
                active, budget_tokens=budget, taken_ids=taken, estimator=est
            )
        minted = [r.id for r in result.reflections]
        known = await store.memory_subset(sid, minted)
        if known.observations or known.reflections:
            # A minted id met a dropped observation's (48 random bits): merge again.
            taken |= set(known.observations_by_id) | set(known.reflections_by_id)
            result = await consolidate_reflections(
                active, budget_tokens=budget, taken_ids=taken, estimator=est
            )
        try:
            entry = await self._append(result.record(), progress, head)
        except StaleCoverageError:
            return self._record(
                progress, WorkerOutcome("consolidator", "skipped", "stale_coverage")
            )
        run = result.run
        return self._record(
            progress,
            WorkerOutcome(
                "consolidator",
                "ran",
                None,
                (entry.id,),
                tuple(r.id for r in result.reflections),
                1 if run is not None else 0,
                run.turns if run is not None else 0,
                run.tool_calls if run is not None else 0,
                error=error,
            ),
        )

    async def _bind(
        self, observation_ids: list[str], reflection_ids: list[str], progress: _Progress
    ) -> None:
        refs = [f"om:{i}" for i in observation_ids] + [f"reflection:{i}" for i in reflection_ids]
        if not refs:
            return
        scopes = await self.session.store.scope_map(self.session.id)
        if not scopes.has_host_scopes:
            return
        entry = await self._append(
            {"type": SCOPE_BOUND, "scopeId": scopes.current, "refs": refs}, progress
        )
        self._emit(
            SCOPE_BOUND_EVENT, {"scopeId": scopes.current, "refs": refs, "entryId": entry.id}
        )

    async def _drop(
        self, progress: _Progress, invalid: frozenset[str] = frozenset()
    ) -> WorkerOutcome:
        spec = self._workers["dropper"]
        store, sid = self.session.store, self.session.id
        scopes = await store.scope_map(sid)
        if scopes.has_host_scopes:
            return self._record(progress, WorkerOutcome("dropper", "skipped", "host_scopes"))
        head = await store.memory_head(sid)
        ledger = await withholding_ledger(store, sid, invalid)
        # Revoked observations are already withheld; the dropper never sees their text.
        observations, reflections = active_memory(ledger, invalid)
        pool = [r.observation for r in observations]
        shown = [r.reflection for r in reflections]
        est = self._estimator()
        cap = self.settings.context.observations_pool_max_tokens

        def rendered(kept: list[Observation]) -> int:
            return rendered_memory_tokens(shown, kept, estimator=est, secrets=self._redactor)

        if rendered(pool) <= cap:
            return self._record(progress, WorkerOutcome("dropper", "skipped", "pool_within_limit"))
        target = self.settings.dropper.target_tokens
        leaf = await store.leaf(sid)
        turns = calls = runs = 0
        if self.settings.dropper.policy == "lowest-relevance":
            ids = drop_to_rendered_target(
                shown, pool, target, estimator=est, secrets=self._redactor
            )
        else:
            if spec.provider is None:
                return self._record(
                    progress, WorkerOutcome("dropper", "skipped", "missing_provider")
                )
            ready = await self._ready(spec)
            if ready.call is None:
                return self._not_ready(progress, "dropper", ready)
            try:
                result = await drop_with_model(
                    ready.call, pool, target_tokens=target, covers_up_to_id=leaf, estimator=est
                )
            except WorkerRunError as exc:
                return self._record(
                    progress,
                    WorkerOutcome("dropper", "failed", exc.reason, error=self._error(exc.message)),
                )
            ids = list(result.observation_ids)
            if result.run is not None:
                runs, turns, calls = 1, result.run.turns, result.run.tool_calls
            # The cap must hold even when the model retires too little: finish with the
            # deterministic policy, down to the target.
            remaining = [o for o in pool if o.id not in set(ids)]
            if rendered(remaining) > cap:
                extra = drop_to_rendered_target(
                    shown, remaining, target, estimator=est, secrets=self._redactor
                )
                self._emit(DROPPER_TOPPED_UP, {"count": len(extra)})
                ids.extend(extra)
        try:
            entry = await self._append(
                {"type": OBSERVATIONS_DROPPED, "observationIds": ids, "coversUpToId": leaf}
                if leaf is not None
                else {"type": OBSERVATIONS_DROPPED, "observationIds": ids},
                progress,
                head,
            )
        except StaleCoverageError:
            return self._record(progress, WorkerOutcome("dropper", "skipped", "stale_coverage"))
        return self._record(
            progress,
            WorkerOutcome("dropper", "ran", None, (entry.id,), tuple(ids), runs, turns, calls),
        )

    # -- helpers ----------------------------------------------------------------------

    async def _claimed(self, minted: Sequence[str], taken: set[str]) -> dict[str, str]:
        """New ids for those of ``minted`` the branch already holds (a dropped or
        superseded memory's, which the live ledger the run minted against leaves out).

        One lookup by id (``taken_memory_ids``) instead of reading every id ever recorded;
        with 48 random bits a clash, and so a second round, almost never happens.
        """
        if not minted:
            return {}
        store, sid = self.session.store, self.session.id
        pending = await store.taken_memory_ids(sid, minted)
        taken.update(minted)
        renamed: dict[str, str] = {}
        while pending:
            for old in pending:
                new = create_memory_id()
                while new in taken:
                    new = create_memory_id()
                taken.add(new)
                renamed[old] = new
            clashing = await store.taken_memory_ids(sid, [renamed[old] for old in pending])
            pending = {old for old in pending if renamed[old] in clashing}
        return renamed

    def _not_ready(self, progress: _Progress, worker: WorkerName, ready: _Ready) -> WorkerOutcome:
        if ready.error is not None:
            return self._record(
                progress, WorkerOutcome(worker, "failed", "credential_error", error=ready.error)
            )
        return self._record(progress, WorkerOutcome(worker, "skipped", ready.skip))

    async def _ready(self, spec: _Worker) -> _Ready:
        """The worker's call (model, credential, request), or why it cannot run."""
        assert spec.provider is not None
        model = self.worker_model(spec.name)
        if model is None:
            return _Ready(skip="missing_model")
        redactor = self._redactor
        wanted = spec.settings.credential
        if wanted is None:
            wanted = self._resolver is not None
        if wanted is not False:
            provider_id = wanted if isinstance(wanted, str) else model.provider
            if self._resolver is None:
                return _Ready(skip="missing_credential")
            try:
                credential = await self._resolver(provider_id)
            except Exception as exc:
                return _Ready(error=self._error(f"credential resolver failed: {exc}"))
            if not credential:
                return _Ready(skip="missing_credential")
            redactor = Redactor([*redactor.secrets, credential])
        thinking = self._thinking_override or spec.settings.thinking_level
        request = RequestSettings(
            model=model.id,
            thinking_level=thinking,
            correlation_id=self._request.correlation_id,
            max_output_tokens=self._request.max_output_tokens or model.max_output_tokens,
            options=self._request.options,
        )
        return _Ready(
            call=WorkerCall(
                provider=spec.provider,
                limits=self.limits,
                redactor=redactor,
                request=request,
                instructions=spec.settings.instructions,
                on_sanitized=lambda replaced: self._emit(
                    PROVIDER_TEXT_SANITIZED, {"worker": spec.name, "replacedCharacters": replaced}
                ),
            )
        )

    async def _append(
        self,
        data: dict[str, Any],
        progress: _Progress,
        head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> SessionEntry:
        """Append one memory record through the host callback and check where it landed.

        ``head``: the memory head the record's worker started from; ``StaleCoverageError``
        when another record landed since, and then nothing was stored.
        """
        store, sid = self.session.store, self.session.id
        if data.get("type") in MEMORY_RECORD_TYPES:
            usage = self._meter.take(self._worker)
            if usage:
                data = {**data, "metadata": {**(data.get("metadata") or {}), "usage": usage}}
        if self._session_append:
            return await self._append_at_leaf(data, progress, head)
        previous = await store.leaf(sid)
        # The parent is where the leaf is now; the host's append may place it lower.
        entry = custom_entry(sid, data, parent_id=previous)
        if self._append_takes_head:
            await self._append_entry(entry, expected_memory_head=head)
        else:
            # The host's append cannot compare inside its lock: narrow the race at least.
            check_memory_head(sid, head, await store.memory_head(sid))
            await self._append_entry(entry)
        stored = await stored_on_branch(store, entry)
        if stored is None:
            restored = False
            # Only a leaf moved off the branch comes back; a leaf below ``previous`` holds
            # later entries (another writer's), which stay where they are.
            if previous is not None and not await store.is_on_branch(sid, previous):
                try:
                    await store.checkout(sid, previous)
                    restored = True
                except PrismMemoryError:
                    restored = False
            leaf = await store.leaf(sid)
            message = (
                f"memory entry {entry.id!r} did not land on the current branch of session "
                f"{sid!r} (leaf is {leaf!r}); append_entry must append to this session's "
                "store and branch" + ("; the previous leaf was restored" if restored else "")
            )
            self._last_error = self._error(message)
            self._emit(APPEND_MISMATCH, {"entryId": entry.id, "leaf": leaf})
            raise BranchMismatchError(message, entry_id=entry.id, session_id=sid, url=store.url)
        progress.entry_ids.append(stored.id)
        self._emit(MEMORY_APPENDED, {"entryId": stored.id, "type": data["type"]})
        return stored

    async def _append_at_leaf(
        self, data: dict[str, Any], progress: _Progress, head: str | AnyMemoryHead | None
    ) -> SessionEntry:
        """``_append`` through ``session.append``: the store places the record at the
        leaf inside its write lock and returns it as stored; its session and content are
        checked on that answer (the write could not land in another store or branch)."""
        entry = custom_entry(self.session.id, data)
        stored = await self.session.append(entry, expected_memory_head=head)
        if not same_content(stored, entry):
            message = (
                f"memory entry {entry.id!r} came back from session {stored.session_id!r} "
                f"with other content than appended to session {self.session.id!r}"
            )
            self._last_error = self._error(message)
            self._emit(APPEND_MISMATCH, {"entryId": entry.id, "leaf": stored.id})
            raise BranchMismatchError(
                message, entry_id=entry.id, session_id=self.session.id, url=self.session.store.url
            )
        progress.entry_ids.append(stored.id)
        self._emit(MEMORY_APPENDED, {"entryId": stored.id, "type": data["type"]})
        return stored

    def _error(self, text: str) -> str:
        return bound_error_text(self._redactor.text(text), (), self.limits.max_worker_error_bytes)

    def _estimator(self) -> TokenEstimator:
        if self._estimator_value is None:
            self._estimator_value = get_estimator(self.settings.token_encoding)
        return self._estimator_value

    def _emit(self, event: str, data: dict[str, Any]) -> None:
        self.emit_debug_event(event, data)

    def emit_debug_event(self, event: str, data: dict[str, Any]) -> None:
        """Send one event to the debug sink: redacted; trace events only with ``debug_log``;
        an error event's ``error`` text also becomes ``last_error``."""
        self._debug(event, data)

    def _record_error(self, text: str) -> None:
        self._last_error = self._error(text)


_NOT_RUN: Final = WorkerOutcome("observer", "skipped")
"""Stands for a step an idle flush did not run (it contributes no ids)."""

CHUNK_FAILURES_BEFORE_SPLIT: Final = 3
"""Consecutive failures of the observer chunk at one point before it is retried smaller."""


@dataclass(slots=True)
class _StuckChunk:
    """The observer chunk that failed last: where it starts, how often in a row, and the
    message tokens of the next try there."""

    start_id: str
    failures: int
    tokens: int


def _memory_ids(ledger: ObservationalMemoryLedger) -> set[str]:
    return {r.id for r in ledger.observations} | {r.id for r in ledger.reflections}


def _transient(exc: BaseException) -> bool:
    """Whether a provider failure behind ``exc`` may pass if the same request is retried."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ProviderError):
            return seen.transient
        seen = seen.__cause__
    return False


def _skipped(entries: Sequence[SessionEntry], message_id: str) -> ObserverResult:
    """A run that covers up to ``message_id`` without observing it (it failed alone)."""
    scanned = next(i for i, e in enumerate(entries) if e.id == message_id) + 1
    return ObserverResult(
        (), message_id, (), scanned, len(entries) - scanned, skipped_entry_ids=(message_id,)
    )


def _has_message(entries: Sequence[SessionEntry], invalid: frozenset[str]) -> bool:
    """Whether an observable (eligible, unrevoked) message is among ``entries``."""
    return any(e.id not in invalid and is_eligible_observation_source_entry(e) for e in entries)


def _unrevoked(entries: Sequence[SessionEntry], invalid: frozenset[str]) -> list[SessionEntry]:
    return [e for e in entries if e.id not in invalid] if invalid else list(entries)


def _takes_keyword(func: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        or (p.name == name and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        for p in parameters
    )


def _provider(value: object, providers: Mapping[str, Provider], where: str) -> Provider | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value not in providers:
            raise InvalidInputError(
                f"{where}.provider names provider {value!r}, but providers= has no such id"
            )
        return providers[value]
    if not isinstance(value, Provider):
        raise InvalidInputError(
            f"{where}.provider must be a Provider (with generate()) or a provider id, "
            f"got {type(value).__name__}"
        )
    return value


def _parse_overrides(
    overrides: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    known: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        if key == "options":
            if not isinstance(value, Mapping):
                raise InvalidInputError("overrides['options'] must be a mapping")
            options.update(value)
        elif key in _OVERRIDE_NAMES:
            name = _OVERRIDE_NAMES[key]
            if name in known:
                raise InvalidInputError(f"overrides give {name} twice")
            known[name] = value
        else:
            options[key] = value
    return known, options


def create_observational_memory_runtime(
    *,
    session: Session,
    append_entry: AppendEntry,
    settings: Mapping[str, Any] | ObservationalMemorySettings | None = None,
    observation: Mapping[str, Any] | WorkerSettings | None = None,
    reflection: Mapping[str, Any] | WorkerSettings | None = None,
    dropper: Mapping[str, Any] | WorkerSettings | None = None,
    session_model: Model | str | Mapping[str, Any] | object | None = None,
    credential_resolver: CredentialResolver | None = None,
    secrets: Iterable[str] | None = None,
    debug: DebugSink | None = None,
    overrides: Mapping[str, Any] | None = None,
    providers: Mapping[str, Provider] | None = None,
    estimator: TokenEstimator | None = None,
    invalidated_ids: InvalidationSource = None,
    max_worker_turns: int | None = None,
    max_worker_tool_calls_per_turn: int | None = None,
    max_worker_tool_calls: int | None = None,
    max_worker_argument_bytes: int | None = None,
    max_worker_result_bytes: int | None = None,
    max_worker_message_bytes: int | None = None,
    max_worker_error_bytes: int | None = None,
) -> ObservationalMemoryRuntime:
    """Build the worker runtime of ``session``; nothing runs until ``flush()``.

    ``observation`` / ``reflection`` / ``dropper`` are worker settings (mappings or
    settings models) merged over ``settings``' groups: ``provider`` (a ``Provider`` or an
    id from ``providers=``), ``model``, ``instructions``, ``thinking_level``,
    ``credential``, ``require_explicit_model`` and the thresholds. ``session_model`` is
    the fallback model. ``invalidated_ids`` (a set of ids, or a callable, sync or async,
    asked on every flush) stops revoked sources feeding memory: the observer never shows a
    revoked message (it is still covered), the reflector and dropper never get a revoked
    observation. ``overrides`` are provider-request overrides for every worker
    call (``thinking_level``, ``session_id``/``correlation_id``, ``max_output_tokens``,
    ``options``; other keys go into the request options), not settings.

    Raises ``RemovedSettingError`` for a removed flat settings key (before anything
    else), ``InvalidInputError`` when no worker has a provider or an option is invalid,
    ``LimitExceededError`` for a limit above its hard cap.
    """
    where = "create_observational_memory_runtime()"
    for name, value in (
        ("settings", settings),
        ("observation", observation),
        ("reflection", reflection),
        ("dropper", dropper),
    ):
        if isinstance(value, Mapping):
            if name != "settings":
                # Inside a worker group the nested replacements are valid keys.
                value = {k: v for k, v in value.items() if k not in _GROUP_KEYS}
            reject_removed_settings(value, where=f"{where} {name}")
    if not isinstance(session, Session):
        raise InvalidInputError(f"{where}: session must be a prism_om Session")
    if not callable(append_entry):
        raise InvalidInputError(f"{where}: append_entry must be an async callable")
    invalidation = check_invalidation_source(invalidated_ids)
    resolved = resolve_observational_memory_settings(
        settings, observation=observation, reflection=reflection, dropper=dropper
    )
    limits = resolve_memory_worker_limits(
        agent_max_turns=resolved.agent_max_turns,
        max_worker_turns=max_worker_turns,
        max_worker_tool_calls_per_turn=max_worker_tool_calls_per_turn,
        max_worker_tool_calls=max_worker_tool_calls,
        max_worker_argument_bytes=max_worker_argument_bytes,
        max_worker_result_bytes=max_worker_result_bytes,
        max_worker_message_bytes=max_worker_message_bytes,
        max_worker_error_bytes=max_worker_error_bytes,
    )
    registry = dict(providers or {})
    workers: dict[WorkerName, _Worker] = {}
    for name, group in _SETTINGS_GROUP.items():
        worker_settings: WorkerSettings = getattr(resolved, group)
        provider = _provider(worker_settings.provider, registry, group)
        model = coerce_model(
            worker_settings.model, default_provider=getattr(provider, "provider_id", None)
        )
        workers[name] = _Worker(name, worker_settings, provider, model)
    if all(w.provider is None for w in workers.values()):
        raise InvalidInputError(
            f"{where} needs at least one worker provider: observation.provider, "
            "reflection.provider or dropper.provider"
        )
    known, options = _parse_overrides(overrides)
    correlation = known.get("correlation_id")
    if correlation is None:
        correlation = sanitize_cache_key(f"om:{session.id}")
    elif not isinstance(correlation, str) or not correlation:
        raise InvalidInputError("overrides session_id/correlation_id must be a non-empty string")
    thinking = known.get("thinking_level")
    if thinking is not None and not isinstance(thinking, str):
        raise InvalidInputError("overrides thinking_level must be a string")
    max_output = known.get("max_output_tokens")
    if max_output is not None and (
        isinstance(max_output, bool) or not isinstance(max_output, int) or max_output <= 0
    ):
        raise InvalidInputError("overrides max_output_tokens must be a positive integer")
    return ObservationalMemoryRuntime(
        session=session,
        append_entry=append_entry,
        settings=resolved,
        limits=limits,
        workers=workers,
        session_model=session_model,
        credential_resolver=credential_resolver,
        redactor=Redactor(secrets),
        debug=debug,
        request=RequestSettings(
            correlation_id=correlation, max_output_tokens=max_output, options=options
        ),
        thinking_override=thinking,
        estimator=estimator,
        invalidated_ids=invalidation,
    )
