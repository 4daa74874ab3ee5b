"""Raw-history paging: eligible messages around a cursor entry of one branch.

Pages are exact: each message is the stored entry, redacted of known secrets (its id and
time too, and the page's cursors) and, in ``summary`` detail, cut to its first 200
characters. A page carries the cursor for the
next one (``nextCursor``: the last message of a forward page, the first of a backward
page, or null at the end), so a caller can walk the whole branch in either direction.

Fail closed, identically on both paths: a malformed request (cursor not a non-empty
string of at most 256 characters, bad direction/detail/limit) raises before anything is
read; ``limit`` above 100 raises ``PageTooLargeError``; a cursor that is not an entry of
the branch raises ``EntryNotFoundError``; a cursor that is not a user/assistant/tool
message raises ``InvalidInputError``.

Revoked messages (``invalidated_ids``) keep their place on the page, so paging and its
cursors do not shift, but carry only ``id``, ``role``, ``timestamp`` and ``reason:
"revoked"``: no text, no message.

A store is paged through ``SessionStore.page_message_parts``: the same messages as
``page_messages``, as ``(id, timestamp, message)`` parts (a SQL store reads them straight
from its rows, so no entry is built only to be turned into an item). The pages of the
entries path and the store path are equal.

Result shape (``BranchPage.to_json()``)::

    {"cursor": "...", "direction": "forward", "detail": "summary", "limit": 20,
     "messages": [{"id", "role", "timestamp", "text", "truncated"}   # summary
                  {"id", "role", "timestamp", "message": {...}}    # full
                  {"id", "role", "timestamp", "reason": "revoked"}], # withheld
     "nextCursor": "..." | null, "hasMore": bool}
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.branch_reads import page_around_cursor
from ..core.limits import PAGE_LIMIT_DEFAULT, resolve_page_limit
from ..core.redaction import Redactor, redacted_entry_text, redacted_message_text, redactor
from ..core.shown import shown
from ..core.withheld import withheld_page_item, withheld_page_message
from ..entries import Message, SessionEntry, entry_text, message_text, validate_session_id
from ..errors import InvalidInputError
from ..stores.arguments import check_entry_id
from ..stores.base import MessagePart, SessionStore

__all__ = [
    "SUMMARY_CHARS",
    "BranchPage",
    "PageDetail",
    "PageDirection",
    "build_branch_page",
    "page_message",
    "recall_observational_memory_branch_page_from_entries",
    "recall_observational_memory_branch_page_from_store",
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
            "messages": [dict(m) for m in self.messages],
            "nextCursor": self.next_cursor,
            "hasMore": self.has_more,
        }


def validate_page_request(
    cursor: object,
    limit: object,
    direction: object,
    detail: object,
    default_limit: int = PAGE_LIMIT_DEFAULT,
) -> tuple[str, int, PageDirection, PageDetail]:
    """Check a page request before any entry is read; returns it with the limit resolved."""
    cursor = check_entry_id(cursor, "cursor")
    if direction not in ("forward", "backward"):
        raise InvalidInputError(
            f"direction must be 'forward' or 'backward', got {shown(direction)}",
            field="direction",
        )
    if detail not in ("summary", "full"):
        raise InvalidInputError(
            f"detail must be 'summary' or 'full', got {shown(detail)}", field="detail"
        )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise InvalidInputError(
            f"limit must be an integer, got {type(limit).__name__}", field="limit"
        )
    return cursor, resolve_page_limit(limit, default_limit), direction, detail


def page_message(
    entry: SessionEntry, detail: PageDetail, secrets: Iterable[str] | Redactor | None
) -> dict[str, Any]:
    """One message of a page: id, role, timestamp and text (cut in summary detail)."""
    return _page_item(entry, detail == "summary", redactor(secrets))


def _page_item(entry: SessionEntry, summary: bool, red: Redactor) -> dict[str, Any]:
    message = entry.message
    if message is None:  # page_around_cursor / page_messages return messages only
        raise InvalidInputError(f"entry {entry.id!r} is not a message", entry_id=entry.id)
    if summary:
        # Redact before cutting: a cut first could leave a secret's prefix behind.
        text = redacted_entry_text(entry, red) if red else entry_text(entry)
        return _summary_item(entry.id, message.role, entry.timestamp, text)
    return _full_item(entry.id, entry.timestamp, message, red)


def _message_item(
    entry_id: str, timestamp: str, message: Message, summary: bool, red: Redactor
) -> dict[str, Any]:
    """``_page_item`` from a store's (id, timestamp, message) part: the same item."""
    if summary:
        text = redacted_message_text(message, red) if red else message_text(message)
        return _summary_item(entry_id, message.role, timestamp, text)
    return _full_item(entry_id, timestamp, message, red)


def _summary_item(entry_id: str, role: str, timestamp: str, text: str) -> dict[str, Any]:
    return {
        "id": entry_id,
        "role": role,
        "timestamp": timestamp,
        "text": text[:SUMMARY_CHARS],
        "truncated": len(text) > SUMMARY_CHARS,
    }


def _full_item(entry_id: str, timestamp: str, message: Message, red: Redactor) -> dict[str, Any]:
    return {
        "id": entry_id,
        "role": message.role,
        "timestamp": timestamp,
        "message": red.value(message.model_dump(by_alias=True, mode="json")),
    }


def build_branch_page(
    chosen: Sequence[SessionEntry],
    more: bool,
    *,
    cursor: str,
    limit: int,
    direction: PageDirection,
    detail: PageDetail,
    secrets: Iterable[str] | Redactor | None = None,
    invalidated_ids: Iterable[str] | None = None,
) -> BranchPage:
    """A page from the messages a store or ``page_around_cursor`` chose (oldest first)."""
    next_cursor = None
    if more and chosen:
        next_cursor = chosen[-1].id if direction == "forward" else chosen[0].id
    red = redactor(secrets)
    invalid = (
        invalidated_ids
        if isinstance(invalidated_ids, frozenset)
        else frozenset(invalidated_ids or ())
    )
    summary = detail == "summary"
    return _redacted_page(
        BranchPage(
            cursor=cursor,
            direction=direction,
            detail=detail,
            limit=limit,
            messages=tuple(
                withheld_page_message(e) if e.id in invalid else _page_item(e, summary, red)
                for e in chosen
            ),
            next_cursor=next_cursor,
        ),
        red,
    )


def _redacted_page(page: BranchPage, red: Redactor) -> BranchPage:
    """``page_statement`` with its ids and times redacted too: an entry id is the host's text, and
    a cursor given back would confirm a secret in it (the texts are redacted already)."""
    if not red:
        return page
    return BranchPage(
        cursor=red.text(page.cursor),
        direction=page.direction,
        detail=page.detail,
        limit=page.limit,
        messages=tuple(
            {**m, "id": red.text(m["id"]), "timestamp": red.text(m["timestamp"])}
            for m in page.messages
        ),
        next_cursor=None if page.next_cursor is None else red.text(page.next_cursor),
    )


def recall_observational_memory_branch_page_from_entries(
    entries: Sequence[SessionEntry],
    cursor: str,
    *,
    limit: int | None = None,
    direction: PageDirection = "forward",
    detail: PageDetail = "summary",
    secrets: Iterable[str] | Redactor | None = None,
    default_limit: int = PAGE_LIMIT_DEFAULT,
    invalidated_ids: Iterable[str] | None = None,
) -> BranchPage:
    """Page eligible messages after (``forward``) or before (``backward``) ``cursor``.

    Over the branch's entries (root first): pure, O(n). ``invalidated_ids`` withholds the
    text of revoked messages (see the module docstring).
    """
    cursor, size, way, level = validate_page_request(
        cursor, limit, direction, detail, default_limit
    )
    red = redactor(secrets)
    invalid = frozenset(invalidated_ids or ())
    chosen, more = page_around_cursor(entries, cursor, size, way)
    return build_branch_page(
        chosen,
        more,
        cursor=cursor,
        limit=size,
        direction=way,
        detail=level,
        secrets=red,
        invalidated_ids=invalid,
    )


def recall_observational_memory_branch_page_from_store(
    store: SessionStore,
    session_id: str,
    cursor: str,
    *,
    leaf_id: str | None = None,
    limit: int | None = None,
    direction: PageDirection = "forward",
    detail: PageDetail = "summary",
    secrets: Iterable[str] | Redactor | None = None,
    default_limit: int = PAGE_LIMIT_DEFAULT,
    invalidated_ids: Iterable[str] | None = None,
) -> Awaitable[BranchPage]:
    """A page from a store, over ``store.page_messages()`` (an indexed query where indexed).

    The arguments are checked now, before anything is read; the read runs when awaited.
    """
    session_id = validate_session_id(session_id)
    cursor, size, way, level = validate_page_request(
        cursor, limit, direction, detail, default_limit
    )
    if leaf_id is not None:
        check_entry_id(leaf_id, "leaf_id")
    red = redactor(secrets)
    invalid = frozenset(invalidated_ids or ())
    return _page_store(store, session_id, leaf_id, cursor, size, way, level, red, invalid)


async def _page_store(
    store: SessionStore,
    session_id: str,
    leaf_id: str | None,
    cursor: str,
    limit: int,
    direction: PageDirection,
    detail: PageDetail,
    red: Redactor,
    invalid: frozenset[str],
) -> BranchPage:
    # The store's rows straight to items (``SessionStore.page_message_parts``): no
    # SessionEntry built only to be read here.
    parts, more = await store.page_message_parts(session_id, cursor, limit, direction, leaf_id)
    return _page_from_parts(parts, more, cursor, limit, direction, detail, red, invalid)


def _page_from_parts(
    parts: Sequence[MessagePart],
    more: bool,
    cursor: str,
    limit: int,
    direction: PageDirection,
    detail: PageDetail,
    red: Redactor,
    invalid: frozenset[str],
) -> BranchPage:
    """``build_branch_page`` over a store's ``page_message_parts``: the same page."""
    next_cursor = None
    if more and parts:
        next_cursor = parts[-1][0] if direction == "forward" else parts[0][0]
    summary = detail == "summary"
    if summary and not red:
        messages = _plain_summaries(parts, invalid)
    else:
        messages = tuple(
            withheld_page_item(entry_id, message.role, timestamp)
            if entry_id in invalid
            else _message_item(entry_id, timestamp, message, summary, red)
            for entry_id, timestamp, message in parts
        )
    page = BranchPage(
        cursor=cursor,
        direction=direction,
        detail=detail,
        limit=limit,
        messages=messages,
        next_cursor=next_cursor,
    )
    return _redacted_page(page, red)


def _plain_summaries(
    parts: Sequence[MessagePart], invalid: frozenset[str]
) -> tuple[dict[str, Any], ...]:
    """``_message_item`` of each part in summary detail with no secret, in one loop: the
    page's common case, where a call per item cost as much as the item."""
    items: list[dict[str, Any]] = []
    append = items.append
    for entry_id, timestamp, message in parts:
        role = message.role
        if entry_id in invalid:
            append(withheld_page_item(entry_id, role, timestamp))
            continue
        text = message.content
        if type(text) is not str or message.tool_calls:
            text = message_text(message)  # parts to join; plain text is the content itself
        append(
            {
                "id": entry_id,
                "role": role,
                "timestamp": timestamp,
                "text": text[:SUMMARY_CHARS],
                "truncated": len(text) > SUMMARY_CHARS,
            }
        )
    return tuple(items)
