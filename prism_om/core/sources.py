"""Which entries may be observed: user, assistant and tool messages, nothing else.

Memory records, compactions and other bookkeeping entries never enter an observer prompt;
they only move the scan coverage past them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ..entries import SessionEntry

__all__ = [
    "ELIGIBLE_SOURCE_ROLES",
    "MEMORY_TOOL_NAMES",
    "eligible_observation_sources",
    "is_eligible_observation_source_entry",
    "memory_tool_exchange_ids",
]

ELIGIBLE_SOURCE_ROLES: Final = frozenset({"user", "assistant", "tool"})
# Tools that read the memory itself: a call to one and its answer restate memory (or the
# messages it rests on), so observing them would record memory of memory. The observer
# scans them like bookkeeping (``workers.transcript.select_observer_batch``).
MEMORY_TOOL_NAMES: Final = frozenset({"recall", "search_memory"})


def is_eligible_observation_source_entry(entry: SessionEntry) -> bool:
    """True for a ``message`` entry whose role is user, assistant or tool."""
    return (
        entry.kind == "message"
        and entry.message is not None
        and entry.message.role in ELIGIBLE_SOURCE_ROLES
    )


def eligible_observation_sources(entries: Iterable[SessionEntry]) -> list[SessionEntry]:
    """The eligible message entries of ``entries``, in their order."""
    return [e for e in entries if is_eligible_observation_source_entry(e)]


def memory_tool_exchange_ids(entries: Iterable[SessionEntry]) -> frozenset[str]:
    """Ids of the messages among ``entries`` that only call the memory tools, and of the
    results answering those calls (or naming such a tool): what an observer must not see.

    Read over a whole unscanned run, not one chunk, so a result split from its call by
    a chunk boundary is still known as one. An assistant message with anything else in it
    (text, another tool's call) is not listed: the observer shows it without those calls.
    """
    calls: set[str] = set()
    found: set[str] = set()
    for entry in entries:
        message = entry.message
        if entry.kind != "message" or message is None:
            continue
        if message.role == "tool":
            if message.tool_call_id in calls or message.name in MEMORY_TOOL_NAMES:
                found.add(entry.id)
            continue
        ours = [c.id for c in message.tool_calls or () if c.name in MEMORY_TOOL_NAMES]
        if not ours:
            continue
        calls.update(ours)
        if len(ours) == len(message.tool_calls or ()) and not message.text().strip():
            found.add(entry.id)
    return frozenset(found)
