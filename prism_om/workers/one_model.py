"""The runtime the CLI, the MCP server and the eval harness build: one provider and model
for both the observer and the reflector, and the dropper's policy that needs no model.
One place, so the three keep the same worker setup."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..core.withheld import InvalidationSource
from ..providers.base import Provider
from ..session import Session
from ..tokens import TokenEstimator
from .model import Model
from .runtime import DebugSink, ObservationalMemoryRuntime, create_observational_memory_runtime

__all__ = ["one_model_runtime"]


def one_model_runtime(
    session: Session,
    provider: Provider | str,
    model: Model | str,
    *,
    settings: Mapping[str, Any] | None = None,
    secrets: Iterable[str] | None = None,
    debug: DebugSink | None = None,
    estimator: TokenEstimator | None = None,
    invalidated_ids: InvalidationSource = None,
) -> ObservationalMemoryRuntime:
    """``create_observational_memory_runtime`` for ``session`` with ``provider`` and
    ``model`` observing and reflecting, and the lowest-relevance dropper."""
    worker = {"provider": provider, "model": model}
    return create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation=worker,
        reflection=worker,
        dropper={"policy": "lowest-relevance"},
        settings=settings,
        secrets=secrets,
        debug=debug,
        estimator=estimator,
        invalidated_ids=invalidated_ids,
    )
