"""Memory workers: the observer, reflector and dropper, their tool loop and runtime.

Nothing here starts on import. ``create_observational_memory_runtime`` builds the explicit
``flush()`` pipeline; ``run_observer`` / ``run_reflector`` / ``run_dropper`` run one worker
directly (``max_turns`` required) and write nothing; ``OfflineMemoryProvider`` is an
extractive baseline that needs no model.
"""

from __future__ import annotations

from .dropper import DropperResult, lowest_relevance_drop, run_dropper
from .loop import (
    MAX_JSON_DEPTH,
    RequestSettings,
    ToolInputError,
    WorkerRun,
    WorkerRunError,
    WorkerTool,
    run_worker,
)
from .model import Model, coerce_model, resolve_input_cap
from .observer import ObserverResult, pending_message_tokens, run_observer
from .offline import OFFLINE_MODEL, OfflineMemoryProvider
from .prompts import DROPPER_INSTRUCTIONS, OBSERVER_INSTRUCTIONS, REFLECTOR_INSTRUCTIONS
from .reflector import ReflectorResult, run_reflector
from .runtime import (
    AppendEntry,
    DebugSink,
    FlushResult,
    ObservationalMemoryRuntime,
    WorkerOutcome,
    create_observational_memory_runtime,
)
from .tools import DROP_OBSERVATIONS, RECORD_OBSERVATIONS, RECORD_REFLECTIONS
from .transcript import parse_observation_lines, parse_transcript

__all__ = [
    "DROPPER_INSTRUCTIONS",
    "DROP_OBSERVATIONS",
    "MAX_JSON_DEPTH",
    "OBSERVER_INSTRUCTIONS",
    "OFFLINE_MODEL",
    "RECORD_OBSERVATIONS",
    "RECORD_REFLECTIONS",
    "REFLECTOR_INSTRUCTIONS",
    "AppendEntry",
    "DebugSink",
    "DropperResult",
    "FlushResult",
    "Model",
    "ObservationalMemoryRuntime",
    "ObserverResult",
    "OfflineMemoryProvider",
    "ReflectorResult",
    "RequestSettings",
    "ToolInputError",
    "WorkerOutcome",
    "WorkerRun",
    "WorkerRunError",
    "WorkerTool",
    "coerce_model",
    "create_observational_memory_runtime",
    "lowest_relevance_drop",
    "parse_observation_lines",
    "parse_transcript",
    "pending_message_tokens",
    "resolve_input_cap",
    "run_dropper",
    "run_observer",
    "run_reflector",
    "run_worker",
]
