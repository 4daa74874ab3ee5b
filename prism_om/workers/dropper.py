"""The dropper: retires observations until the active pool is back under its target.

Two policies. ``"lowest-relevance"`` is deterministic and calls no model: it drops the
lowest priority, then the oldest, observations until the pool's tokens are at most the
target. ``"model"`` shows the model the pool, least relevant first (as many as fit one
prompt), and lets it choose with ``drop_observations``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from typing_extensions import Unpack

from ..core.records import Observation, ObservationsDropped
from ..core.redaction import Redactor
from ..core.relevance import lowest_relevance_order
from ..providers.base import Provider
from ..tokens import TokenEstimator, get_estimator
from ._common import ShortLimits, WorkerCall, direct_call
from .loop import WorkerRun, run_worker
from .model import Model
from .prompts import DROPPER_INSTRUCTIONS, dropper_prompt, system_text
from .tools import DropRecorder
from .transcript import serialize_observation, utf8_len

__all__ = ["DropperResult", "drop_with_model", "lowest_relevance_drop", "run_dropper"]


@dataclass(frozen=True, slots=True)
class DropperResult:
    """Observation ids to retire, and the coverage the record carries."""

    observation_ids: tuple[str, ...]
    covers_up_to_id: str | None
    run: WorkerRun | None = None

    def record(self) -> dict[str, Any]:
        """The ``om.observations.dropped`` payload."""
        return ObservationsDropped(
            observation_ids=list(self.observation_ids), covers_up_to_id=self.covers_up_to_id
        ).model_dump(by_alias=True, mode="json")


def lowest_relevance_drop(
    observations: Sequence[Observation],
    target_tokens: int,
    estimator: TokenEstimator | None = None,
    *,
    already: Iterable[str] = (),
) -> list[str]:
    """Ids to drop, least relevant first, until the pool is at most ``target_tokens``.

    ``observations`` is the active pool in record order; ``already`` are ids dropped
    before (they no longer count).
    """
    est = estimator or get_estimator()
    gone = set(already)
    pool = [o for o in observations if o.id not in gone]
    tokens = sum(est.count(o.text) for o in pool)
    dropped: list[str] = []
    for index in lowest_relevance_order(pool):
        if tokens <= target_tokens:
            break
        dropped.append(pool[index].id)
        tokens -= est.count(pool[index].text)
    return dropped


async def drop_with_model(
    call: WorkerCall,
    observations: Sequence[Observation],
    *,
    target_tokens: int,
    covers_up_to_id: str | None,
    estimator: TokenEstimator | None = None,
) -> DropperResult:
    """Ask the model which observations to retire (only those shown may be named)."""
    est = estimator or get_estimator()
    pool_tokens = sum(est.count(o.text) for o in observations)
    system = system_text(DROPPER_INSTRUCTIONS, call.instructions)
    frame = dropper_prompt("", pool_tokens=pool_tokens, target_tokens=target_tokens)
    budget = call.input_budget(system, frame)
    shown: list[str] = []
    lines: list[str] = []
    used = 0
    for index in lowest_relevance_order(observations):
        line = serialize_observation(observations[index], call.redactor)
        if used + utf8_len(line) > budget:
            break
        shown.append(observations[index].id)
        lines.append(line)
        used += utf8_len(line)
    if not shown:
        return DropperResult((), covers_up_to_id)
    recorder = DropRecorder(shown)
    run = await run_worker(
        provider=call.provider,
        system=system,
        prompt=dropper_prompt("".join(lines), pool_tokens=pool_tokens, target_tokens=target_tokens),
        tools=[recorder.tool()],
        limits=call.limits,
        redactor=call.redactor,
        request=call.request,
        on_sanitized=call.on_sanitized,
    )
    return DropperResult(tuple(recorder.dropped), covers_up_to_id, run)


async def run_dropper(
    *,
    provider: Provider,
    observations: Sequence[Observation],
    target_tokens: int,
    max_turns: int,
    covers_up_to_id: str | None = None,
    model: Model | str | None = None,
    instructions: str | None = None,
    thinking_level: str | None = None,
    correlation_id: str | None = None,
    options: Mapping[str, Any] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    estimator: TokenEstimator | None = None,
    **limits: Unpack[ShortLimits],
) -> DropperResult:
    """Run the model dropper over the active ``observations``; writes nothing.

    For the deterministic policy call :func:`lowest_relevance_drop` instead.
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
    return await drop_with_model(
        call,
        observations,
        target_tokens=target_tokens,
        covers_up_to_id=covers_up_to_id,
        estimator=estimator,
    )
