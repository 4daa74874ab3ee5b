"""What ``status`` adds to ``om:status``: the transcript's tokens beside the thresholds.

So a user can tell whether ``observe`` will run: the observer runs once the unobserved
messages reach ``observation.messageTokens``, the reflector once the unreflected
observations reach ``reflection.observationTokens``, and a host compacts past
``context.compactAfterTokens``. The figures are measured as the runtime measures them
(revoked messages and memory left out), against the default settings the CLI's own
``observe`` uses.

After a compaction the next request no longer replays the whole branch: it carries the
compaction's summary, the messages it kept and those after it. That history, not the
branch, is what ``context.compactAfterTokens`` gates, so right after a compaction the
figures say "compacted" rather than "over the threshold" (``transcript.compaction``).
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
    branch_tokens = await store.branch_tokens(session_id, leaf_id)
    return {
        "transcript": {
            "branchTokens": branch_tokens,
            "unobservedMessageTokens": unobserved,
            "unreflectedObservationTokens": observation_pool_tokens(unreflected, estimator),
            "compaction": await _since_compaction(store, session_id, leaf_id, invalid),
        },
        "thresholds": {
            "observation.messageTokens": DEFAULT_MESSAGE_TOKENS,
            "reflection.observationTokens": DEFAULT_OBSERVATION_TOKENS,
            "context.compactAfterTokens": DEFAULT_COMPACT_AFTER_TOKENS,
        },
    }


async def _since_compaction(
    store: SessionStore, session_id: str, leaf_id: str | None, invalid: frozenset[str]
) -> dict[str, Any] | None:
    """The branch's latest compaction and the tokens of the history a host replays since
    (its summary, the messages it kept, the messages after it); None before any."""
    from ..entries import entry_text
    from ..tokens import get_estimator
    from ..workers.observer import pending_message_tokens

    compaction = await store.last_compaction(session_id, leaf_id)
    if compaction is None:
        return None
    estimator = get_estimator()
    keep = [i for i in dict.fromkeys((compaction.data or {}).get("keepEntryIds") or ()) if i]
    found = await store.get_many([i for i in keep if isinstance(i, str)])
    after = await store.entries_after(session_id, compaction.id, leaf_id)
    kept = [e for e in found.values() if e.session_id == session_id]
    messages = [e for e in [*kept, *after] if e.id not in invalid]
    return {
        "entryId": compaction.id,
        "timestamp": compaction.timestamp,
        "entriesAfter": len(after),
        "historyTokens": estimator.count(entry_text(compaction))
        + pending_message_tokens(messages, estimator),
    }


def compaction_gauge_tokens(figures: dict[str, Any]) -> int:
    """What ``context.compactAfterTokens`` is compared with: the history since the latest
    compaction, else the whole branch."""
    seen = figures["transcript"]
    compaction = seen.get("compaction")
    return int(compaction["historyTokens"] if compaction else seen["branchTokens"])


def threshold_lines(figures: dict[str, Any]) -> list[str]:
    """The figures as lines for a person, each saying what crossing it means."""
    seen, limits = figures["transcript"], figures["thresholds"]

    def gate(value: int, limit: int, worker: str) -> str:
        if value >= limit:
            return f"{worker} runs on the next observe"
        if value == 0:
            return f"nothing for the {worker}"
        return f"{worker} waits (or observe --force)"

    compaction = seen.get("compaction")
    limit = limits["context.compactAfterTokens"]
    if compaction is None:
        transcript = (
            f"transcript: {seen['branchTokens']:,} tokens on the current branch "
            f"(context.compactAfterTokens {limit:,})"
        )
    else:
        history = compaction["historyTokens"]
        state = (
            "over it: a host compacts again on its next turn"
            if history >= limit
            else "compacted"
            if compaction["entriesAfter"] == 0
            else "under it"
        )
        transcript = (
            f"transcript: {seen['branchTokens']:,} tokens on the current branch; compacted at "
            f"{compaction['entryId']} ({compaction['entriesAfter']} entries since): the "
            f"history since holds {history:,} tokens of context.compactAfterTokens "
            f"{limit:,}: {state}"
        )
    return [
        transcript,
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
