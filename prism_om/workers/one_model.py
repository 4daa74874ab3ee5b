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

__all__ = ["one_model_runtime", "one_model_workers"]


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
    return create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        **one_model_workers(provider, model),
        settings=settings,
        secrets=secrets,
        debug=debug,
        estimator=estimator,
        invalidated_ids=invalidated_ids,
    )


def one_model_workers(provider: Provider | str, model: Model | str) -> dict[str, Any]:
    """The worker options of ``one_model_runtime``, for a caller that builds the runtime
    another way (``attach(agent, **one_model_workers(...))``)."""
    worker = {"provider": provider, "model": model}
    return {
        "observation": worker,
        "reflection": dict(worker),
        "dropper": {"policy": "lowest-relevance"},
    }
