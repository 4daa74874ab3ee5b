"""Debug events: every event name the package emits, and the one function that emits them.

Events go to a host's debug sink, ``(event, data) -> None``. Every event leaves through a
``DebugEmitter``, which redacts the data of the known secrets (all strings, nested values
and dict keys, in every escaped form), so no event type can carry a secret out.

Two classes of event:

* **error events** (``ERROR_EVENTS``, and any name ending in ``-error``) report a failure.
  They always reach a given sink, whatever ``debug_log`` says, and the emitter's
  ``on_error`` hook receives their redacted ``error`` text (the runtime keeps it as
  ``last_error``);
* **warning events** (``WARNING_EVENTS``) report work that went on in a reduced form (a
  worker input cut to fit its prompt, a compaction that cannot bring the request under
  its gate). Like errors they always reach a given sink, because silence would hide the
  loss, but they do not set ``last_error``;
* **trace events** (``TRACE_EVENTS``) describe normal progress. They reach the sink only
  when ``debug_log`` is on.

With no sink, ``debug_log`` sends every event to the ``prism_om`` logger at DEBUG level.
A new event name belongs in one of the three sets; a test reads the emitting calls out of
the source and fails on a name that is in neither.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Final

from .core.redaction import Redactor, redactor

__all__ = [
    "APPEND_MISMATCH",
    "COMPACTION_TRIGGER_ERROR",
    "DROPPER_TOPPED_UP",
    "FLUSH_DONE",
    "FLUSH_SKIPPED",
    "FLUSH_START",
    "MEMORY_APPENDED",
    "SCOPE_BOUND_EVENT",
    "WORKER_COMPLETED",
    "WORKER_FAILED",
    "WORKER_SKIPPED",
    "DEBUG_EVENTS",
    "ERROR_EVENTS",
    "POST_RUN_ERROR",
    "COMPACTION_INSUFFICIENT",
    "WORKER_INPUT_TRUNCATED",
    "OBSERVER_MESSAGE_SKIPPED",
    "OBSERVER_OBSERVATIONS_REJECTED",
    "PROVIDER_TEXT_SANITIZED",
    "TRACE_EVENTS",
    "WARNING_EVENTS",
    "WINDOW_OVER_BUDGET",
    "DebugEmitter",
    "DebugSink",
    "is_error_event",
]

DebugSink = Callable[[str, dict[str, Any]], None]
"""``(event, data) -> None``: receives debug events."""

COMPACTION_TRIGGER_ERROR: Final = "observational-memory:compaction-trigger-error"
POST_RUN_ERROR: Final = "observational-memory:post-run-error"
PROVIDER_TEXT_SANITIZED: Final = "prism:provider-text-sanitized"
COMPACTION_INSUFFICIENT: Final = "observational-memory:compaction-insufficient"
"""A compaction left the next request at or above its gate's threshold."""
WORKER_INPUT_TRUNCATED: Final = "om.worker.input_truncated"
OBSERVER_MESSAGE_SKIPPED: Final = "om.observer.message_skipped"
"""A message failed the observer alone, run after run: recorded as skipped, never observed."""
WINDOW_OVER_BUDGET: Final = "observational-memory:window-over-budget"
"""Messages memory does not cover yet did not fit the model's input: the request shows the
newest that fit and names the cursor to recall the rest (never a silent drop)."""
OBSERVER_OBSERVATIONS_REJECTED: Final = "om.observer.observations_rejected"
"""An observer run recorded nothing: every record_observations call it made was rejected."""
# The runtime's own events, one constant each so emitters and listeners share the name.
WORKER_FAILED: Final = "om.worker.failed"
APPEND_MISMATCH: Final = "om.append.mismatch"
FLUSH_SKIPPED: Final = "om.flush.skipped"
FLUSH_START: Final = "om.flush.start"
FLUSH_DONE: Final = "om.flush.done"
WORKER_SKIPPED: Final = "om.worker.skipped"
WORKER_COMPLETED: Final = "om.worker.completed"
SCOPE_BOUND_EVENT: Final = "om.scope.bound"
DROPPER_TOPPED_UP: Final = "om.dropper.topped_up"
MEMORY_APPENDED: Final = "om.append"

ERROR_EVENTS: Final = frozenset(
    {
        COMPACTION_TRIGGER_ERROR,
        POST_RUN_ERROR,
        WORKER_FAILED,
        APPEND_MISMATCH,
    }
)
TRACE_EVENTS: Final = frozenset(
    {
        FLUSH_SKIPPED,
        FLUSH_START,
        FLUSH_DONE,
        WORKER_SKIPPED,
        WORKER_COMPLETED,
        SCOPE_BOUND_EVENT,
        DROPPER_TOPPED_UP,
        MEMORY_APPENDED,
        PROVIDER_TEXT_SANITIZED,
    }
)
WARNING_EVENTS: Final = frozenset(
    {
        COMPACTION_INSUFFICIENT,
        WORKER_INPUT_TRUNCATED,
        OBSERVER_MESSAGE_SKIPPED,
        OBSERVER_OBSERVATIONS_REJECTED,
        WINDOW_OVER_BUDGET,
    }
)
DEBUG_EVENTS: Final = ERROR_EVENTS | WARNING_EVENTS | TRACE_EVENTS

_log = logging.getLogger("prism_om")


def is_error_event(event: str) -> bool:
    """True for an event that reports a failure (always delivered to a given sink)."""
    return event in ERROR_EVENTS or event.endswith("-error")


class DebugEmitter:
    """Redacts, gates and delivers debug events; the only way an event leaves the package."""

    __slots__ = ("_on_error", "_redactor", "sink", "trace")

    def __init__(
        self,
        sink: DebugSink | None,
        secrets: Iterable[str] | Redactor | None = None,
        *,
        trace: bool = False,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.sink = sink
        self.trace = trace
        self._redactor = redactor(secrets)
        self._on_error = on_error

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        error = is_error_event(event)
        if not error and not self.trace and event not in WARNING_EVENTS:
            return  # nothing leaves, so nothing needs redacting
        clean: dict[str, Any] = self._redactor.value(data)
        text = clean.get("error")
        if error and self._on_error is not None and isinstance(text, str):
            self._on_error(text)
        if self.sink is not None:
            self.sink(event, clean)
        elif event in WARNING_EVENTS:
            _log.warning("%s %s", event, clean)
        elif self.trace:
            _log.debug("%s %s", event, clean)
