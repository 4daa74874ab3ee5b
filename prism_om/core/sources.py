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
    "eligible_observation_sources",
    "is_eligible_observation_source_entry",
]

ELIGIBLE_SOURCE_ROLES: Final = frozenset({"user", "assistant", "tool"})


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
