"""Raw-history paging: eligible messages around a cursor entry of one branch.

Pages are exact: each message is the stored entry, redacted of known secrets and, in
``summary`` detail, cut to its first 200 characters. A page carries the cursor for the
next one, so a caller can walk the whole branch in either direction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..entries import SessionEntry
from ..errors import EntryNotFoundError, InvalidInputError
from .limits import resolve_page_limit
from .redact import redact_value
from .sources import is_eligible_observation_source_entry

__all__ = [
    "SUMMARY_CHARS",
    "BranchPage",
    "PageDirection",
    "PageDetail",
    "page_message",
    "recall_branch_page_from_entries",
    "validate_page_request",
]

PageDirection = Literal["forward", "backward"]
PageDetail = Literal["summary", "full"]
SUMMARY_CHARS = 200


@dataclass(frozen=True)
class BranchPage:
    """One page of raw messages, oldest first."""

    cursor: str
    direction: PageDirection
    detail: PageDetail
    limit: int
    messages: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    next_cursor: str | None = None

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "cursor": self.cursor,
            "direction": self.direction,
            "detail": self.detail,
            "limit": self.limit,
            "messages": list(self.messages),
            "nextCursor": self.next_cursor,
            "hasMore": self.has_more,
        }


def validate_page_request(
    cursor: object, limit: object, direction: object, detail: object, default_limit: int = 20
) -> tuple[str, int, PageDirection, PageDetail]:
    """Check a page request before any entry is read."""
    if not isinstance(cursor, str) or not cursor:
        raise InvalidInputError(f"cursor must be an entry id, got {cursor!r}")
    if direction not in ("forward", "backward"):
        raise InvalidInputError(f"direction must be 'forward' or 'backward', got {direction!r}")
    if detail not in ("summary", "full"):
        raise InvalidInputError(f"detail must be 'summary' or 'full', got {detail!r}")
    if limit is not None and not isinstance(limit, int):
        raise InvalidInputError(f"limit must be an integer, got {limit!r}")
    return cursor, resolve_page_limit(limit, default_limit), direction, detail


def page_message(entry: SessionEntry, detail: PageDetail, secrets: Sequence[str]) -> dict[str, Any]:
    """One message of a page: id, role, timestamp and text (cut in summary detail)."""
    assert entry.message is not None
    text = redact_value(entry.message.text(), secrets)
    item: dict[str, Any] = {
        "id": entry.id,
        "role": entry.message.role,
        "timestamp": entry.timestamp,
    }
    if detail == "summary":
        item["text"] = text[:SUMMARY_CHARS]
        item["truncated"] = len(text) > SUMMARY_CHARS
    else:
        item["message"] = redact_value(
            entry.message.model_dump(by_alias=True, mode="json"), secrets
        )
    return item


def recall_branch_page_from_entries(
    entries: Sequence[SessionEntry],
    cursor: str,
    *,
    limit: int,
    direction: PageDirection,
    detail: PageDetail,
    secrets: Sequence[str] = (),
) -> BranchPage:
    """The reference page over a branch given as a list of entries, root first."""
    position = next((i for i, e in enumerate(entries) if e.id == cursor), None)
    if position is None:
        raise EntryNotFoundError(f"cursor {cursor!r} is not an entry of the current branch")
    if not is_eligible_observation_source_entry(entries[position]):
        raise InvalidInputError(
            f"cursor {cursor!r} is a {entries[position].kind} entry, not a user, assistant "
            "or tool message"
        )
    if direction == "forward":
        pool = [e for e in entries[position + 1 :] if is_eligible_observation_source_entry(e)]
        chosen, more = pool[:limit], len(pool) > limit
        next_cursor = chosen[-1].id if more and chosen else None
    else:
        pool = [e for e in entries[:position] if is_eligible_observation_source_entry(e)]
        chosen, more = pool[-limit:], len(pool) > limit
        next_cursor = chosen[0].id if more and chosen else None
    return BranchPage(
        cursor=cursor,
        direction=direction,
        detail=detail,
        limit=limit,
        messages=tuple(page_message(e, detail, secrets) for e in chosen),
        next_cursor=next_cursor,
    )
