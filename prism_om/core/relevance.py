"""Lowest relevance first, and the token size of the observation pool.

"Lowest relevance" means lowest priority first, then oldest ``observedAt`` first, then
earliest recorded first. Render trimming, compaction trimming and the deterministic
dropper policy all order by this one key, so they retire the same observations.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from ..tokens import TokenEstimator, get_estimator
from .records import PRIORITY_RANK, Observation

__all__ = [
    "instant",
    "lowest_relevance_order",
    "observation_pool_tokens",
    "observation_tokens",
]


def instant(timestamp: str) -> datetime:
    """A comparable instant for an ISO 8601 timestamp; a naive one is read as UTC."""
    moment = datetime.fromisoformat(timestamp)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def lowest_relevance_order(
    observations: Sequence[Observation], instants: Sequence[datetime] | None = None
) -> list[int]:
    """Indexes into ``observations`` (given in record order), least relevant first.

    ``instants``: each observation's ``instant(observed_at)``, when the caller has them.
    """
    at = instants if instants is not None else [instant(o.observed_at) for o in observations]
    return sorted(
        range(len(observations)),
        key=lambda i: (PRIORITY_RANK[observations[i].priority], at[i], i),
    )


def observation_tokens(observation: Observation, estimator: TokenEstimator | None = None) -> int:
    """Tokens one observation adds to the pool: its text."""
    return (estimator or get_estimator()).count(observation.text)


def observation_pool_tokens(
    observations: Sequence[Observation], estimator: TokenEstimator | None = None
) -> int:
    """Tokens of a pool of observations (the measure ``observations_pool_max_tokens`` caps)."""
    est = estimator or get_estimator()
    # Line by line: the pool is measured every flush, and its texts rarely change.
    return sum(est.count_lines(o.text) for o in observations)
