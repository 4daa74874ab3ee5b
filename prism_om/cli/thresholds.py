"""What ``status`` adds to ``om:status``: the transcript's tokens beside the thresholds.

So a user can tell whether ``observe`` will run: the observer runs once the unobserved
messages reach ``observation.messageTokens``, the reflector once the unreflected
observations reach ``reflection.observationTokens``, and a host compacts past
``context.compactAfterTokens``. The figures are measured as the runtime measures them
(revoked messages and memory left out), against the default settings the CLI's own
``observe`` uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..stores import SessionStore

__all__ = ["memory_thresholds", "threshold_lines"]


async def memory_thresholds(
    store: SessionStore, session_id: str, invalid: frozenset[str], *, leaf_id: str | None = None
) -> dict[str, Any]:
    """``{"transcript": {...token counts}, "thresholds": {...settings}}`` for one session's
    branch (default: the current leaf's)."""
    from ..core.relevance import observation_pool_tokens
    from ..observational_memory.coverage import observations_uncovered_by_reflection_from_entries
    from ..observational_memory.settings import (
        DEFAULT_COMPACT_AFTER_TOKENS,
        DEFAULT_MESSAGE_TOKENS,
        DEFAULT_OBSERVATION_TOKENS,
    )
    from ..tokens import get_estimator
    from ..workers.observer import pending_message_tokens

    estimator = get_estimator()
    live = await store.live_ledger(session_id, leaf_id)
    unscanned = await store.entries_after(session_id, live.observation_covers_up_to_id, leaf_id)
    unobserved = pending_message_tokens((e for e in unscanned if e.id not in invalid), estimator)
    unreflected = observations_uncovered_by_reflection_from_entries(live, invalidated_ids=invalid)
    return {
        "transcript": {
            "branchTokens": await store.branch_tokens(session_id, leaf_id),
            "unobservedMessageTokens": unobserved,
            "unreflectedObservationTokens": observation_pool_tokens(unreflected, estimator),
        },
        "thresholds": {
            "observation.messageTokens": DEFAULT_MESSAGE_TOKENS,
            "reflection.observationTokens": DEFAULT_OBSERVATION_TOKENS,
            "context.compactAfterTokens": DEFAULT_COMPACT_AFTER_TOKENS,
        },
    }


def threshold_lines(figures: dict[str, Any]) -> list[str]:
    """The figures as lines for a person, each saying what crossing it means."""
    seen, limits = figures["transcript"], figures["thresholds"]

    def gate(value: int, limit: int, worker: str) -> str:
        if value >= limit:
            return f"{worker} runs on the next observe"
        if value == 0:
            return f"nothing for the {worker}"
        return f"{worker} waits (or observe --force)"

    return [
        f"transcript: {seen['branchTokens']:,} tokens on the current branch "
        f"(context.compactAfterTokens {limits['context.compactAfterTokens']:,})",
        f"unobserved messages: {seen['unobservedMessageTokens']:,} tokens of "
        f"observation.messageTokens {limits['observation.messageTokens']:,}: "
        + gate(seen["unobservedMessageTokens"], limits["observation.messageTokens"], "observer"),
        f"unreflected observations: {seen['unreflectedObservationTokens']:,} tokens of "
        f"reflection.observationTokens {limits['reflection.observationTokens']:,}: "
        + gate(
            seen["unreflectedObservationTokens"],
            limits["reflection.observationTokens"],
            "reflector",
        ),
    ]
