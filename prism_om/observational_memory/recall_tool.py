"""The optional ``recall`` tool: exact-id memory recall or current-branch message paging.

The tool reads one session's current branch from the host, either a ``get_entries``
callback (``(session_id) -> list[SessionEntry]``, sync or async) or a store (the indexed
path: ``ledger()``, ``get()`` and ``page_messages()``, never the whole branch).

Arguments are ``{"id": "<12 hex>", "sourcesOffset"?: >= 0}`` or ``{"cursor": "<entry
id>", "limit"?: 1..100, "direction"?: "forward"|"backward", "detail"?: "summary"|"full"}``.
A key whose value is ``null`` counts as absent (models often send optional keys as null).
An id recall returns at most ``RECALL_SOURCES_DEFAULT_LIMIT`` (100) sources, with
``sourcesTotal`` and ``nextSourcesOffset``; calling again with ``sourcesOffset`` set to
that value reads the next slice.

Failures are typed errors **raised** by ``handler`` (all ``PrismMemoryError``
subclasses), never a result object, so a host's tool dispatch reports them as a failed
call: unknown keys or wrong types -> ``InvalidInputError``; ``id`` and ``cursor`` together,
neither, or paging options beside ``id`` -> ``AmbiguousInputError``; a malformed id or
cursor -> ``InvalidIdError``; ``limit`` above 100 -> ``PageTooLargeError``. All of these
are raised before the host callback or the store is touched. A branch that belongs to
another session -> ``SessionMismatchError``; a cursor off the branch ->
``EntryNotFoundError``; a non-message cursor -> ``InvalidInputError``. An unknown or
revoked id is an answer, not an error: ``{"found": false, "reason": ...}``.

``invalidated_ids`` (a set, or a callable asked on every call) withholds exactly as
:mod:`.withheld` says: a revoked id answers ``reason: "revoked"``, a revoked message on a
page carries no text. ``page_limit`` is the page size when a call gives no ``limit``
(``retrieval.pageLimit``; the attached tool passes the settings' value).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from ..core.ledger import ObservationalMemoryLedger
from ..core.limits import PAGE_LIMIT_DEFAULT, PAGE_LIMIT_HARD_CAP, resolve_page_limit
from ..core.redaction import Redactor, redact_error, redactor
from ..core.withheld import InvalidationSource, check_invalidation_source, resolve_invalidation
from ..entries import validate_session_id
from ..errors import AmbiguousInputError, InvalidInputError, PrismMemoryError
from ..ids import MEMORY_ID_PATTERN
from ..providers.base import ToolDefinition
from ..stores.base import SessionStore
from ._source import BranchSource, GetEntries, maybe_await
from .page import (
    recall_observational_memory_branch_page_from_entries,
    recall_observational_memory_branch_page_from_store,
    validate_page_request,
)
from .recall import (
    check_memory_id,
    check_sources_window,
    recall_observational_memory_from_entries,
    recall_observational_memory_from_store,
)

__all__ = [
    "RECALL_TOOL_NAME",
    "GetSharedLedgers",
    "RecallMemoryTool",
    "create_recall_memory_tool",
]

RECALL_TOOL_NAME: Final = "recall"

GetSharedLedgers: TypeAlias = Callable[
    [str],
    "Awaitable[Sequence[ObservationalMemoryLedger]] | Sequence[ObservationalMemoryLedger]",
]
"""Host hook for granted shared scopes: folded ledgers whose ids exact recall may also
resolve (branch paging stays on the current branch)."""

_PAGE_KEYS: Final = ("limit", "direction", "detail")
_SOURCES_OFFSET: Final = "sourcesOffset"
_KEYS: Final = frozenset({"id", "cursor", _SOURCES_OFFSET, *_PAGE_KEYS})

_DESCRIPTION: Final = (
    "Recall exact source evidence for an observational-memory id (the 12-character ids "
    "shown in brackets), or page the raw user/assistant/tool messages of the current "
    "branch around a cursor entry id. Pass either {id} or {cursor, limit?, direction?, "
    "detail?}, never both. Exact lookup only: it does not search by topic. An id recall "
    "returns up to 100 sources; when nextSourcesOffset is not null, call again with "
    "sourcesOffset set to it for the rest."
)


def _parameters() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "id": {
                "type": "string",
                "pattern": MEMORY_ID_PATTERN.pattern,
                "description": "An observation or reflection id to recall with its sources.",
            },
            _SOURCES_OFFSET: {
                "type": "integer",
                "minimum": 0,
                "description": "Id recall only: skip this many sources (nextSourcesOffset "
                "of the previous call).",
            },
            "cursor": {
                "type": "string",
                "minLength": 1,
                "description": "A message entry id to page from.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": PAGE_LIMIT_HARD_CAP,
                "description": "Messages per page (cursor paging only).",
            },
            "direction": {
                "type": "string",
                "enum": ["forward", "backward"],
                "description": "Page after (forward) or before (backward) the cursor.",
            },
            "detail": {
                "type": "string",
                "enum": ["summary", "full"],
                "description": "summary: first 200 characters; full: the whole message.",
            },
        },
    }


class RecallMemoryTool:
    """The ``recall`` tool: ``definition`` for the provider, ``handler`` for dispatch."""

    def __init__(
        self,
        source: BranchSource,
        *,
        secrets: Iterable[str] | Redactor | None = None,
        page_limit: int = PAGE_LIMIT_DEFAULT,
        shared: GetSharedLedgers | None = None,
        invalidated_ids: InvalidationSource = None,
    ) -> None:
        self._source = source
        self._redactor = redactor(secrets)
        self._page_limit = resolve_page_limit(page_limit, name="page_limit")
        self._invalidated = check_invalidation_source(invalidated_ids)
        if shared is not None and not callable(shared):
            raise InvalidInputError("shared must be callable: (session_id) -> ledgers")
        self._shared = shared
        self.definition = ToolDefinition(
            name=RECALL_TOOL_NAME, description=_DESCRIPTION, parameters=_parameters()
        )

    @property
    def name(self) -> str:
        return self.definition.name

    async def handler(self, args: Mapping[str, Any], *, session_id: str) -> dict[str, Any]:
        """Answer one call for the calling session; the result is JSON-serialisable.

        A refused call's error says what was wrong with the secrets redacted: the host
        hands its message to the model, and it may quote the cursor or id it was given.
        """
        try:
            return await self._answer(args, session_id)
        except PrismMemoryError as exc:
            redact_error(exc, self._redactor)
            raise

    async def _answer(self, args: Mapping[str, Any], session_id: str) -> dict[str, Any]:
        # Everything about the request is checked before the branch is read.
        if not isinstance(args, Mapping):
            raise InvalidInputError(
                f"recall arguments must be an object, got {type(args).__name__}"
            )
        unknown = [k for k in args if k not in _KEYS]
        if unknown:
            shown = ", ".join(repr(k)[:40] for k in unknown[:5])
            raise InvalidInputError(
                f"unknown recall argument(s) {shown}; allowed: id, sourcesOffset, cursor, "
                "limit, direction, detail"
            )
        session_id = validate_session_id(session_id)
        given = {k: v for k, v in args.items() if v is not None}
        if ("id" in given) == ("cursor" in given):
            raise AmbiguousInputError(
                "recall takes either id (exact memory recall) or cursor (message paging), "
                + ("not both" if "id" in given else "and got neither")
            )
        if "id" in given:
            extras = [k for k in _PAGE_KEYS if k in given]
            if extras:
                raise AmbiguousInputError(
                    f"{', '.join(extras)} only apply to cursor paging, not to id recall"
                )
            offset, _ = check_sources_window(
                given.get(_SOURCES_OFFSET, 0), None, offset_name=_SOURCES_OFFSET
            )
            return await self._recall(check_memory_id(given["id"]), session_id, offset)
        if _SOURCES_OFFSET in given:
            raise AmbiguousInputError(f"{_SOURCES_OFFSET} only applies to id recall, not paging")
        cursor, limit, direction, detail = validate_page_request(
            given["cursor"],
            given.get("limit"),
            given.get("direction", "forward"),
            given.get("detail", "summary"),
            self._page_limit,
        )
        if self._source.store is None:
            entries = await self._source.entries(session_id)
            page = recall_observational_memory_branch_page_from_entries(
                entries,
                cursor,
                limit=limit,
                direction=direction,
                detail=detail,
                secrets=self._redactor,
                invalidated_ids=await resolve_invalidation(self._invalidated),
            )
        else:
            store = await self._source.check_store_session(session_id)
            page = await recall_observational_memory_branch_page_from_store(
                store,
                session_id,
                cursor,
                limit=limit,
                direction=direction,
                detail=detail,
                secrets=self._redactor,
                invalidated_ids=await resolve_invalidation(self._invalidated),
            )
        return page.to_json()

    async def _recall(
        self, memory_id: str, session_id: str, sources_offset: int = 0
    ) -> dict[str, Any]:
        extra: list[ObservationalMemoryLedger] = []
        if self._source.store is None:
            entries = await self._source.entries(session_id)
            extra = await self._shared_ledgers(session_id)
            result = recall_observational_memory_from_entries(
                entries,
                memory_id,
                secrets=self._redactor,
                extra_ledgers=extra,
                invalidated_ids=await resolve_invalidation(self._invalidated),
                sources_offset=sources_offset,
            )
        else:
            store = await self._source.check_store_session(session_id)
            extra = await self._shared_ledgers(session_id)
            result = await recall_observational_memory_from_store(
                store,
                session_id,
                memory_id,
                secrets=self._redactor,
                extra_ledgers=extra,
                invalidated_ids=await resolve_invalidation(self._invalidated),
                sources_offset=sources_offset,
            )
        return result.to_json()

    async def _shared_ledgers(self, session_id: str) -> list[ObservationalMemoryLedger]:
        if self._shared is None:
            return []
        ledgers = list(await maybe_await(self._shared(session_id)))
        for ledger in ledgers:
            if not isinstance(ledger, ObservationalMemoryLedger):
                raise InvalidInputError(
                    f"shared must return ObservationalMemoryLedger values, got "
                    f"{type(ledger).__name__}"
                )
        return ledgers


def create_recall_memory_tool(
    *,
    get_entries: GetEntries | None = None,
    store: SessionStore | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    page_limit: int = PAGE_LIMIT_DEFAULT,
    shared: GetSharedLedgers | None = None,
    invalidated_ids: InvalidationSource = None,
) -> RecallMemoryTool:
    """The optional ``recall`` tool over a host callback or a store (exactly one).

    ``page_limit`` is the default page size (1-100). ``shared`` is the hook for granted
    shared scopes: ``(session_id) -> ledgers`` merged into exact-id recall only.
    ``invalidated_ids`` is the invalidation set (or a callable returning it, asked on
    every call) whose memory and messages the tool withholds.
    """
    return RecallMemoryTool(
        BranchSource(get_entries=get_entries, store=store),
        secrets=secrets,
        page_limit=page_limit,
        shared=shared,
        invalidated_ids=invalidated_ids,
    )
