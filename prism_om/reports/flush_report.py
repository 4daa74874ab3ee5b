"""A flush's outcome as JSON: ``prism-om observe --json`` and MCP's ``observe`` tool."""

from __future__ import annotations

from typing import Any

from ..workers import FlushResult

__all__ = ["flush_json"]


def flush_json(result: FlushResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "reason": result.reason,
        "warnings": list(result.warnings),
        "error": result.error,
        "observationIds": list(result.observation_ids),
        "reflectionIds": list(result.reflection_ids),
        "droppedObservationIds": list(result.dropped_observation_ids),
        "entryIds": list(result.entry_ids),
        "outcomes": [
            {
                "worker": o.worker,
                "status": o.status,
                "reason": o.reason,
                "runs": o.runs,
                "memoryIds": list(o.memory_ids),
                "error": o.error,
                "skippedIds": list(o.skipped_ids),
            }
            for o in result.outcomes
        ],
    }
