"""What a direct worker call and the runtime share: limits, redaction, request settings."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..core.limits import MemoryWorkerLimits, resolve_memory_worker_limits
from ..core.redaction import Redactor, redactor
from ..providers.base import Provider, bound_error_text
from .loop import RequestSettings, WorkerRunError
from .model import Model, coerce_model
from .transcript import utf8_len

__all__ = ["WorkerCall", "direct_call", "source_budget"]

# Share of max_worker_message_bytes that the worker's input may take; the rest is room for
# the calls and results the model produces about it (an extractive observer's arguments
# are about as long as its sources).
INPUT_SHARE = 3
# Below this, not even one cut message (header plus marker) fits.
MIN_INPUT_BYTES = 256


@dataclass(frozen=True, slots=True)
class WorkerCall:
    """One worker's provider, request fields, instructions, limits and redactor."""

    provider: Provider
    limits: MemoryWorkerLimits
    redactor: Redactor = field(default_factory=Redactor)
    request: RequestSettings = field(default_factory=RequestSettings)
    instructions: str | None = None
    on_sanitized: Callable[[int], None] | None = None
    """Hears how many lone surrogates a run replaced in the model's calls."""

    def input_budget(self, system: str, frame: str) -> int:
        return source_budget(self.limits, system, frame, self.redactor)


def source_budget(
    limits: MemoryWorkerLimits, system: str, frame: str, redact: Redactor | None = None
) -> int:
    """Bytes the worker's input may take, or ``WorkerRunError`` when too few are left."""
    budget = limits.max_worker_message_bytes // INPUT_SHARE - utf8_len(system) - utf8_len(frame)
    if budget < MIN_INPUT_BYTES:
        text = (
            f"max_worker_message_bytes = {limits.max_worker_message_bytes} leaves {budget} "
            "bytes for the worker's input after its instructions; raise it"
        )
        raise WorkerRunError(
            "message_bytes",
            bound_error_text((redact or Redactor()).text(text), (), limits.max_worker_error_bytes),
        )
    return budget


class ShortLimits(TypedDict, total=False):
    """The short limit names a direct ``run_observer`` / ``run_reflector`` /
    ``run_dropper`` call accepts (``max_turns`` is a required argument of its own)."""

    max_tool_calls_per_turn: int | None
    max_tool_calls: int | None
    max_argument_bytes: int | None
    max_result_bytes: int | None
    max_message_bytes: int | None
    max_error_bytes: int | None


def direct_call(
    *,
    provider: Provider,
    max_turns: int,
    model: Model | str | None,
    instructions: str | None,
    thinking_level: str | None,
    correlation_id: str | None,
    options: Mapping[str, Any] | None,
    secrets: Iterable[str] | Redactor | None,
    limits: ShortLimits,
) -> WorkerCall:
    """A ``WorkerCall`` from a direct ``run_*`` call's keyword arguments."""
    resolved = resolve_memory_worker_limits(max_turns=max_turns, **limits)
    default_provider = getattr(provider, "provider_id", None)
    chosen = coerce_model(model, default_provider=default_provider)
    return WorkerCall(
        provider=provider,
        limits=resolved,
        redactor=redactor(secrets),
        request=RequestSettings(
            model=chosen.id if chosen else None,
            thinking_level=thinking_level,
            correlation_id=correlation_id,
            max_output_tokens=chosen.max_output_tokens if chosen else None,
            options=dict(options or {}),
        ),
        instructions=instructions,
    )
