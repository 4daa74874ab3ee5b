"""The observer: turns unscanned transcript entries into source-backed observations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from typing_extensions import Unpack

from ..core.records import Observation, ObservationsRecorded
from ..core.redaction import Redactor
from ..core.sources import eligible_observation_sources
from ..entries import SessionEntry
from ..providers.base import Provider
from ..tokens import TokenEstimator, get_estimator
from ._common import ShortLimits, WorkerCall, direct_call
from .loop import WorkerRun, WorkerRunError, run_worker
from .model import Model
from .prompts import OBSERVER_INSTRUCTIONS, observer_prompt, system_text
from .tools import ObservationRecorder
from .transcript import select_observer_batch

__all__ = ["ObserverResult", "observe", "pending_message_tokens", "run_observer"]


@dataclass(frozen=True, slots=True)
class ObserverResult:
    """One observer run over a prefix of the unscanned entries."""

    observations: tuple[Observation, ...]
    covers_up_to_id: str | None
    """The last entry the run scanned: the coverage its record carries."""
    source_ids: tuple[str, ...]
    """The message entries shown to the model."""
    scanned: int
    """Entries covered (messages and bookkeeping)."""
    remaining: int
    """Unscanned entries left for a further run (the input was larger than one prompt)."""
    truncated_ids: tuple[str, ...] = ()
    run: WorkerRun | None = None
    """The loop's account; None when no model call was needed."""
    rejected: int = 0
    """``record_observations`` calls the run refused (ids outside the chunk, bad fields)."""
    skipped_entry_ids: tuple[str, ...] = ()
    """Messages covered without a run: each failed the observer alone, time after time."""

    def record(self) -> dict[str, Any]:
        """The ``om.observations.recorded`` payload of this run."""
        return ObservationsRecorded(
            observations=list(self.observations),
            covers_up_to_id=self.covers_up_to_id,
            skipped_entry_ids=list(self.skipped_entry_ids) or None,
        ).model_dump(by_alias=True, mode="json", exclude_none=True)


def pending_message_tokens(
    entries: Iterable[SessionEntry], estimator: TokenEstimator | None = None
) -> int:
    """Tokens of the eligible messages among ``entries`` (what ``message_tokens`` gates)."""
    est = estimator or get_estimator()
    return sum(est.count_entry(e) for e in eligible_observation_sources(entries))


async def observe(
    call: WorkerCall,
    entries: Sequence[SessionEntry],
    *,
    taken_ids: set[str] | None = None,
    withheld: frozenset[str] = frozenset(),
    max_message_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
    shown: list[str] | None = None,
) -> ObserverResult:
    """Observe the longest prefix of ``entries`` that fits one prompt (and, with
    ``max_message_tokens``, holds at most that many message tokens: one chunk).

    Messages whose id is in ``withheld`` (revoked) are covered but never shown. ``shown``
    receives the ids of the messages put in the prompt before the model is called, so a
    caller knows them even when the run fails.
    """
    system = system_text(OBSERVER_INSTRUCTIONS, call.instructions)
    budget = call.input_budget(system, observer_prompt("", truncated=True))
    batch = select_observer_batch(
        entries,
        budget,
        call.redactor,
        withheld=withheld,
        max_tokens=max_message_tokens,
        estimator=estimator,
    )
    remaining = len(entries) - len(batch.scanned)
    if not batch.sources:
        return ObserverResult((), batch.covers_up_to_id, (), len(batch.scanned), remaining)
    if shown is not None:
        shown.extend(e.id for e in batch.sources)
    recorder = ObservationRecorder(batch.sources, taken_ids=taken_ids)
    run = await run_worker(
        provider=call.provider,
        system=system,
        prompt=observer_prompt(batch.text, truncated=bool(batch.truncated)),
        tools=[recorder.tool()],
        limits=call.limits,
        redactor=call.redactor,
        request=call.request,
        on_sanitized=call.on_sanitized,
    )
    scanned = len(batch.scanned)
    if recorder.rejected and recorder.observations:
        # A refused call's messages were neither recorded nor judged empty: the run covers
        # up to the newest message it did record from, and the rest is shown again. (A run
        # whose every call was refused covers its chunk, with a warning, as before: a model
        # that can never record must not hold the chunk forever.)
        scanned = _handled_prefix(batch.scanned, recorder.observations)
    if run.stopped == "max_turns":
        # Cut by its turn cap, the model may not have reached the end of the chunk: the
        # run covers only up to the newest message it recorded from, and the rest waits
        # for the next run. Coverage is earned, never assumed.
        scanned = _handled_prefix(batch.scanned, recorder.observations)
        if scanned == 0:
            raise WorkerRunError(
                "max_turns",
                f"observer run reached max_worker_turns ({call.limits.max_worker_turns}) "
                "without recording anything: its messages stay uncovered",
            )
    return ObserverResult(
        observations=tuple(recorder.observations),
        covers_up_to_id=batch.scanned[scanned - 1].id,
        source_ids=tuple(
            e.id for e in batch.sources[: _shown_within(batch.sources, batch.scanned[:scanned])]
        ),
        scanned=scanned,
        remaining=len(entries) - scanned,
        truncated_ids=batch.truncated,
        run=run,
        rejected=recorder.rejected,
    )


def _handled_prefix(scanned: Sequence[SessionEntry], observations: Sequence[Observation]) -> int:
    """How many of ``scanned`` lead up to the newest entry an observation cites."""
    cited = {s for o in observations for s in o.source_entry_ids}
    last = max((i for i, e in enumerate(scanned) if e.id in cited), default=-1)
    return last + 1


def _shown_within(sources: Sequence[SessionEntry], scanned: Sequence[SessionEntry]) -> int:
    """How many of ``sources`` (shown messages) lie within ``scanned``."""
    ids = {e.id for e in scanned}
    return sum(1 for e in sources if e.id in ids)


async def run_observer(
    *,
    provider: Provider,
    entries: Sequence[SessionEntry],
    max_turns: int,
    model: Model | str | None = None,
    instructions: str | None = None,
    thinking_level: str | None = None,
    correlation_id: str | None = None,
    options: Mapping[str, Any] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    taken_ids: set[str] | None = None,
    message_tokens: int | None = None,
    **limits: Unpack[ShortLimits],
) -> ObserverResult:
    """Run the observer once over ``entries`` (the unscanned entries, branch order).

    Writes nothing: append ``result.record()`` as a custom entry to persist it. Only the
    prefix that fits one prompt, and with ``message_tokens`` at most that many message
    tokens, is observed (``result.remaining`` tells what is left); call again with the
    rest. Raises ``WorkerRunError`` on any broken limit.
    """
    call = direct_call(
        provider=provider,
        max_turns=max_turns,
        model=model,
        instructions=instructions,
        thinking_level=thinking_level,
        correlation_id=correlation_id,
        options=options,
        secrets=secrets,
        limits=limits,
    )
    return await observe(call, entries, taken_ids=taken_ids, max_message_tokens=message_tokens)
