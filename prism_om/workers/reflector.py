"""The reflector: condenses observations into reflections that rest on their ids."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from typing_extensions import Unpack

from ..core.records import Observation, Reflection, ReflectionsRecorded
from ..core.redaction import Redactor
from ..providers.base import Provider
from ._common import ShortLimits, WorkerCall, direct_call
from .loop import WorkerRun, run_worker
from .model import Model
from .prompts import REFLECTOR_INSTRUCTIONS, reflector_prompt, system_text
from .tools import ReflectionRecorder
from .transcript import TRUNCATION_MARKER, serialize_observation, utf8_len

__all__ = ["ReflectorResult", "chunk_lines", "reflect", "run_reflector"]


@dataclass(frozen=True, slots=True)
class ReflectorResult:
    """A reflector pass: its reflections and the coverage its record carries."""

    reflections: tuple[Reflection, ...]
    covers_up_to_id: str | None
    observation_ids: tuple[str, ...]
    runs: tuple[WorkerRun, ...] = ()
    truncated_ids: tuple[str, ...] = ()
    """Observations too long for one prompt, shown cut with a marker."""

    def record(self) -> dict[str, Any]:
        """The ``om.reflections.recorded`` payload of this pass."""
        return ReflectionsRecorded(
            reflections=list(self.reflections), covers_up_to_id=self.covers_up_to_id
        ).model_dump(by_alias=True, mode="json")


def chunk_lines(items: Sequence[tuple[str, str]], budget: int) -> list[list[tuple[str, str]]]:
    """Split ``(id, line)`` pairs into runs of lines within ``budget`` bytes each.

    A line longer than the budget alone is cut with a marker (its id stays citable).
    """
    chunks: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    used = 0
    for item_id, line in items:
        size = utf8_len(line)
        if size > budget:
            marker = TRUNCATION_MARKER.format(n=size) + "\n"
            room = budget - utf8_len(marker) - 8
            cut = line.encode("utf-8")[: max(room, 0)].decode("utf-8", errors="ignore")
            line = cut.rstrip("\n") + " " + marker
            size = utf8_len(line)
        if current and used + size > budget:
            chunks.append(current)
            current, used = [], 0
        current.append((item_id, line))
        used += size
    if current:
        chunks.append(current)
    return chunks


async def reflect(
    call: WorkerCall,
    observations: Sequence[Observation],
    *,
    covers_up_to_id: str | None,
    taken_ids: set[str] | None = None,
) -> ReflectorResult:
    """Reflect over ``observations``, one worker run per chunk that fits a prompt."""
    system = system_text(REFLECTOR_INSTRUCTIONS, call.instructions)
    budget = call.input_budget(system, reflector_prompt(""))
    lines = [(o.id, serialize_observation(o, call.redactor)) for o in observations]
    taken = set(taken_ids or ())
    reflections: list[Reflection] = []
    runs: list[WorkerRun] = []
    for chunk in chunk_lines(lines, budget):
        recorder = ReflectionRecorder([i for i, _ in chunk], taken_ids=taken)
        runs.append(
            await run_worker(
                provider=call.provider,
                system=system,
                prompt=reflector_prompt("".join(line for _, line in chunk)),
                tools=[recorder.tool()],
                limits=call.limits,
                redactor=call.redactor,
                request=call.request,
                on_sanitized=call.on_sanitized,
            )
        )
        reflections.extend(recorder.reflections)
        taken.update(r.id for r in recorder.reflections)
    return ReflectorResult(
        tuple(reflections),
        covers_up_to_id,
        tuple(o.id for o in observations),
        tuple(runs),
        tuple(i for i, line in lines if utf8_len(line) > budget),
    )


async def run_reflector(
    *,
    provider: Provider,
    observations: Sequence[Observation],
    max_turns: int,
    covers_up_to_id: str | None = None,
    model: Model | str | None = None,
    instructions: str | None = None,
    thinking_level: str | None = None,
    correlation_id: str | None = None,
    options: Mapping[str, Any] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    taken_ids: set[str] | None = None,
    **limits: Unpack[ShortLimits],
) -> ReflectorResult:
    """Run the reflector over ``observations``; writes nothing (append ``record()``).

    Input larger than one prompt is split into chunks, each one run with its own limits;
    the reflections of every chunk form one result. ``taken_ids`` are memory ids already
    on the branch, which new reflection ids must avoid.
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
    return await reflect(call, observations, covers_up_to_id=covers_up_to_id, taken_ids=taken_ids)
