"""The rendered memory's size: what ``context.observations_pool_max_tokens`` holds down.

The dropper measures the memory as the agent reads it (``render_observational_memory`` of
the active reflections and observations: title, headings, ids, times, priorities and
text), not the observations' bare text, which the per-line framing can double. Dropping
the least relevant observations (lowest priority, then oldest) until the rendered memory
is within a target then bounds what every context build shows, reflections included
(those are held to ``reflection.budget_tokens`` by the consolidating pass).

Ids are measured as one fixed id: a memory id is random, and its token count varies with
its digits (``000000000000`` is fewer tokens than ``f3a9c1e07b2d``), so counting the ids
as written would make the same conversation drop a different number of observations from
one run to the next. The id's share is small and the same for every id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from ..tokens import TokenEstimator, get_estimator
from .records import Observation, Reflection
from .redaction import Redactor
from .relevance import lowest_relevance_order
from .render import render_observational_memory

__all__ = ["drop_to_rendered_target", "rendered_memory_tokens"]

_ID = re.compile(r"(?<=\[)[0-9a-f]{12}(?=\])")
_FIXED_ID: Final = "0a1b2c3d4e5f"


def rendered_memory_tokens(
    reflections: Sequence[Reflection],
    observations: Sequence[Observation],
    *,
    estimator: TokenEstimator | None = None,
    secrets: Iterable[str] | Redactor | None = None,
) -> int:
    """Tokens of the rendered memory of ``reflections`` and ``observations``."""
    text = render_observational_memory(reflections, observations, secrets=secrets)
    # Line by line: most lines of the memory repeat from one measure to the next.
    return (estimator or get_estimator()).count_lines(_ID.sub(_FIXED_ID, text))


def drop_to_rendered_target(
    reflections: Sequence[Reflection],
    observations: Sequence[Observation],
    target_tokens: int,
    *,
    estimator: TokenEstimator | None = None,
    secrets: Iterable[str] | Redactor | None = None,
) -> list[str]:
    """Observation ids to drop, least relevant first, until the rendered memory of what
    is left is at most ``target_tokens`` (all of them when even that is too much).

    Dropping one more observation never lengthens the text, so the fewest drops that fit
    are found by a binary search: O(n log n) to render, whatever the pool size.
    """
    est = estimator or get_estimator()
    order = lowest_relevance_order(observations)

    def fits(k: int) -> bool:
        gone = {observations[i].id for i in order[:k]}
        kept = [o for o in observations if o.id not in gone]
        return rendered_memory_tokens(reflections, kept, estimator=est, secrets=secrets) <= (
            target_tokens
        )

    lo, hi = 0, len(order)
    if fits(lo):
        return []
    while hi - lo > 1:  # fits(hi) is assumed (or nothing fits): the smallest k that fits
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return [observations[i].id for i in order[:hi]]
