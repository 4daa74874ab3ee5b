"""Entries or a store: the one place that tells them apart.

Every reference function that accepts either a branch's entries (root first) or a
``SessionStore`` is defined here as a thin facade. Entries go to the pure function in
:mod:`prism_om.core` (or the service module), synchronously; a store with a
``session_id`` (and optional ``leaf_id``) goes to the async store path, which reads only
what it needs through the store's memory queries (``ledger()``, ``recent_messages()``,
...), so its cost follows the memory, not the transcript. Both return identical results.
The ``@overload`` stubs live only here; everything else takes one kind of input.

``BranchSource`` (a host callback or a store, for the recall tool and the commands) and
``read_ledger_and_scopes`` (a shared scope's owner or participant) make the same choice
through ``is_store``.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, overload

from typing_extensions import TypeIs

from ..core.context_blocks import (
    BlockOptions,
    ContextBlock,
    build_observational_memory_context_blocks_from_entries,
    context_blocks_from_parts,
)
from ..core.ledger import ObservationalMemoryLedger, fold_ledger
from ..core.limits import PAGE_LIMIT_DEFAULT, RECENT_WINDOW_MAX_BYTES
from ..core.projection import (
    ObservationalMemoryProjection,
    build_observational_memory_projection_from_entries,
)
from ..core.recent_window import (
    DEFAULT_KEEP_RECENT_ENTRIES,
    check_keep_recent_entries,
    render_recent_message_window_from_entries,
    select_recent_message_entries_from_entries,
)
from ..core.records import Observation
from ..core.redaction import Redactor
from ..core.scope_map import WorkScopeMap, fold_work_scope_map
from ..entries import SessionEntry, validate_session_id
from ..errors import AmbiguousInputError, InvalidInputError, SessionMismatchError
from ..stores._together import read_together
from ..stores.base import SessionStore
from ..tokens import TokenEstimator
from .coverage import (
    observations_uncovered_by_reflection_from_entries,
    observations_uncovered_by_reflection_from_store,
    unscanned_entries_from_entries,
    unscanned_entries_from_store,
)
from .page import (
    BranchPage,
    PageDetail,
    PageDirection,
    recall_observational_memory_branch_page_from_entries,
    recall_observational_memory_branch_page_from_store,
)
from .recall import (
    MemoryRecall,
    recall_observational_memory_from_entries,
    recall_observational_memory_from_store,
)
from .withholding import withholding_ledger

__all__ = [
    "BranchSource",
    "GetEntries",
    "build_observational_memory_context_blocks",
    "build_observational_memory_projection",
    "fold_observational_memory_ledger",
    "is_store",
    "maybe_await",
    "observations_uncovered_by_reflection",
    "read_ledger_and_scopes",
    "recall_observational_memory",
    "recall_observational_memory_branch_page",
    "render_recent_message_window",
    "select_recent_message_entries",
    "store_session",
    "unscanned_entries",
]


_STORE_TYPES: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def is_store(value: object) -> TypeIs[SessionStore]:
    """True for a session store: the one test, ``isinstance(value, SessionStore)``.

    The answer is remembered per class: a runtime protocol check walks every member of
    the protocol (tens of microseconds), and every facade call asks it once per call.
    A protocol of methods is met by the class, so the class decides.
    """
    kind = type(value)
    known = _STORE_TYPES.get(kind)
    if known is None:
        known = isinstance(value, SessionStore)
        with contextlib.suppress(TypeError):  # a class that cannot be weakly referenced
            _STORE_TYPES[kind] = known
    return known


def store_session(session_id: str | None, function: str) -> str:
    """The session id a store-backed call needs, or a clear error naming the function."""
    if session_id is None:
        raise InvalidInputError(f"{function}() on a store needs session_id=...")
    return validate_session_id(session_id)


GetEntries: TypeAlias = Callable[
    [str], "Awaitable[Sequence[SessionEntry]] | Sequence[SessionEntry]"
]
"""Host callback: the current branch (root first) of the calling session."""


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class BranchSource:
    """One session's current branch, from a host callback or from a store.

    Shared by the recall tool and the commands. Every read first makes sure the branch
    belongs to the calling session, so a tool or command wired to the wrong session fails
    closed with ``SessionMismatchError`` instead of answering from someone else's memory.
    """

    def __init__(
        self, *, get_entries: GetEntries | None = None, store: SessionStore | None = None
    ) -> None:
        if (get_entries is None) == (store is None):
            raise AmbiguousInputError("pass exactly one of get_entries= or store=")
        if get_entries is not None and not callable(get_entries):
            raise InvalidInputError("get_entries must be callable: (session_id) -> entries")
        self.get_entries = get_entries
        self.store = store

    async def entries(self, session_id: str) -> list[SessionEntry]:
        """The callback's branch for ``session_id``, checked entry by entry."""
        assert self.get_entries is not None
        result = await maybe_await(self.get_entries(session_id))
        if isinstance(result, str | bytes | Mapping) or not isinstance(result, Iterable):
            raise InvalidInputError("get_entries must return a list of SessionEntry")
        entries = list(result)
        for entry in entries:
            if not isinstance(entry, SessionEntry):
                raise InvalidInputError(
                    f"get_entries returned a {type(entry).__name__}, not a SessionEntry"
                )
            if entry.session_id != session_id:
                raise SessionMismatchError(
                    f"get_entries({session_id!r}) returned entry {entry.id!r} of session "
                    f"{entry.session_id!r}: the branch must be the calling session's",
                    entry_id=entry.id,
                    session_id=session_id,
                )
        return entries

    async def check_store_session(self, session_id: str) -> SessionStore:
        """The store, once it is known to hold ``session_id``."""
        assert self.store is not None
        if await self.store.leaf(session_id) is None:
            raise SessionMismatchError(
                f"session {session_id!r} is not in store {self.store.url!r}",
                session_id=session_id,
                url=self.store.url,
            )
        return self.store

    async def open(self, session_id: str) -> list[SessionEntry] | SessionStore:
        """The calling session's branch entries, or the store once it holds the session."""
        session_id = validate_session_id(session_id)
        if self.store is None:
            return await self.entries(session_id)
        return await self.check_store_session(session_id)


async def read_ledger_and_scopes(
    source: SessionStore | Callable[[str], Any], session_id: str
) -> tuple[ObservationalMemoryLedger, WorkScopeMap] | None:
    """A branch's ledger and scope map, or None when it cannot be read or is empty."""
    try:
        if is_store(source):
            if await source.leaf(session_id) is None:
                return None
            return await source.ledger(session_id), await source.scope_map(session_id)
        entries = list(await source(session_id) or ())
    except Exception:
        # Any failure behind the host's boundary (missing tenant, I/O, bad id) denies.
        return None
    if not entries:
        return None
    return fold_ledger(entries), fold_work_scope_map(entries)


# -- the facades: entries -> pure value, store -> awaitable ------------------------------


@overload
def fold_observational_memory_ledger(
    entries: Iterable[SessionEntry],
) -> ObservationalMemoryLedger: ...


@overload
def fold_observational_memory_ledger(
    entries: SessionStore, *, session_id: str, leaf_id: str | None = None
) -> Awaitable[ObservationalMemoryLedger]: ...


def fold_observational_memory_ledger(
    entries: Iterable[SessionEntry] | SessionStore,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
) -> ObservationalMemoryLedger | Awaitable[ObservationalMemoryLedger]:
    """Fold a branch's entries (root first) into its ledger. O(n), pure.

    Given a store and ``session_id`` instead, returns an awaitable of ``store.ledger()``,
    which an indexed store answers from its fold tables.
    """
    if is_store(entries):
        sid = store_session(session_id, "fold_observational_memory_ledger")
        return entries.ledger(sid, leaf_id)
    return fold_ledger(entries)


@overload
def build_observational_memory_projection(
    entries: Sequence[SessionEntry] | ObservationalMemoryLedger,
    *,
    invalidated_ids: Iterable[str] | None = None,
    recent_entry_ids: Iterable[str] | None = None,
) -> ObservationalMemoryProjection: ...


@overload
def build_observational_memory_projection(
    entries: SessionStore,
    *,
    session_id: str,
    leaf_id: str | None = None,
    invalidated_ids: Iterable[str] | None = None,
    recent_entry_ids: Iterable[str] | None = None,
) -> Awaitable[ObservationalMemoryProjection]: ...


def build_observational_memory_projection(
    entries: Sequence[SessionEntry] | ObservationalMemoryLedger | SessionStore,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
    invalidated_ids: Iterable[str] | None = None,
    recent_entry_ids: Iterable[str] | None = None,
) -> ObservationalMemoryProjection | Awaitable[ObservationalMemoryProjection]:
    """Project a branch (entries root first, its folded ledger, or a store). O(n)."""
    if is_store(entries):
        sid = store_session(session_id, "build_observational_memory_projection")
        return _projection_from_store(entries, sid, leaf_id, invalidated_ids, recent_entry_ids)
    return build_observational_memory_projection_from_entries(
        entries, invalidated_ids=invalidated_ids, recent_entry_ids=recent_entry_ids
    )


async def _projection_from_store(
    store: SessionStore,
    session_id: str,
    leaf_id: str | None,
    invalidated_ids: Iterable[str] | None,
    recent_entry_ids: Iterable[str] | None,
) -> ObservationalMemoryProjection:
    return build_observational_memory_projection_from_entries(
        await store.ledger(session_id, leaf_id),
        invalidated_ids=invalidated_ids,
        recent_entry_ids=recent_entry_ids,
    )


@overload
def unscanned_entries(
    entries: Sequence[SessionEntry], ledger: ObservationalMemoryLedger | None = None
) -> list[SessionEntry]: ...


@overload
def unscanned_entries(
    entries: SessionStore,
    ledger: ObservationalMemoryLedger | None = None,
    *,
    session_id: str,
    leaf_id: str | None = None,
) -> Awaitable[list[SessionEntry]]: ...


def unscanned_entries(
    entries: Sequence[SessionEntry] | SessionStore,
    ledger: ObservationalMemoryLedger | None = None,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
) -> list[SessionEntry] | Awaitable[list[SessionEntry]]:
    """Entries after the observation coverage cursor of ``ledger`` (folded from ``entries``).

    Raises ``EntryNotFoundError`` when the cursor names no entry of the branch. Given a
    store, reads only the entries after the cursor.
    """
    if is_store(entries):
        sid = store_session(session_id, "unscanned_entries")
        return unscanned_entries_from_store(entries, sid, leaf_id, ledger)
    return unscanned_entries_from_entries(entries, ledger)


@overload
def observations_uncovered_by_reflection(
    source: Sequence[SessionEntry] | ObservationalMemoryLedger,
    *,
    invalidated_ids: Iterable[str] | None = None,
) -> list[Observation]: ...


@overload
def observations_uncovered_by_reflection(
    source: SessionStore,
    *,
    session_id: str,
    leaf_id: str | None = None,
    invalidated_ids: Iterable[str] | None = None,
) -> Awaitable[list[Observation]]: ...


def observations_uncovered_by_reflection(
    source: Sequence[SessionEntry] | ObservationalMemoryLedger | SessionStore,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
    invalidated_ids: Iterable[str] | None = None,
) -> list[Observation] | Awaitable[list[Observation]]:
    """Active observations recorded after the latest reflection coverage, in record order."""
    if is_store(source):
        sid = store_session(session_id, "observations_uncovered_by_reflection")
        return observations_uncovered_by_reflection_from_store(
            source, sid, leaf_id, invalidated_ids
        )
    return observations_uncovered_by_reflection_from_entries(
        source, invalidated_ids=invalidated_ids
    )


@overload
def select_recent_message_entries(
    entries: Sequence[SessionEntry],
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    *,
    max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
) -> list[SessionEntry]: ...


@overload
def select_recent_message_entries(
    entries: SessionStore,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    *,
    session_id: str,
    leaf_id: str | None = None,
    max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
) -> Awaitable[list[SessionEntry]]: ...


def select_recent_message_entries(
    entries: Sequence[SessionEntry] | SessionStore,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
    max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
) -> list[SessionEntry] | Awaitable[list[SessionEntry]]:
    """The last eligible message entries of the branch, oldest first. O(n).

    Given a store and ``session_id``, reads only those last messages.
    """
    if is_store(entries):
        keep = check_keep_recent_entries(keep_recent_entries)
        sid = store_session(session_id, "select_recent_message_entries")
        return _select_from_store(entries, sid, leaf_id, keep, max_tokens, estimator)
    return select_recent_message_entries_from_entries(
        entries, keep_recent_entries, max_tokens=max_tokens, estimator=estimator
    )


async def _select_from_store(
    store: SessionStore,
    session_id: str,
    leaf_id: str | None,
    keep: int,
    max_tokens: int | None,
    estimator: TokenEstimator | None,
) -> list[SessionEntry]:
    recent = await store.recent_messages(session_id, keep, leaf_id)
    return select_recent_message_entries_from_entries(
        recent, keep, max_tokens=max_tokens, estimator=estimator
    )


@overload
def render_recent_message_window(
    entries: Sequence[SessionEntry],
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    *,
    max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    max_bytes: int = RECENT_WINDOW_MAX_BYTES,
    invalidated_ids: Iterable[str] | None = None,
) -> str: ...


@overload
def render_recent_message_window(
    entries: SessionStore,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    *,
    session_id: str,
    leaf_id: str | None = None,
    max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    max_bytes: int = RECENT_WINDOW_MAX_BYTES,
) -> Awaitable[str]: ...


def render_recent_message_window(
    entries: Sequence[SessionEntry] | SessionStore,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
    max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    max_bytes: int = RECENT_WINDOW_MAX_BYTES,
    invalidated_ids: Iterable[str] | None = None,
) -> str | Awaitable[str]:
    """The text of the recent-message window (see ``recent_message_window``)."""
    if is_store(entries):
        keep = check_keep_recent_entries(keep_recent_entries)
        sid = store_session(session_id, "render_recent_message_window")

        async def from_store(store: SessionStore) -> str:
            recent = await store.recent_messages(sid, keep, leaf_id)
            return render_recent_message_window_from_entries(
                recent,
                keep,
                max_tokens=max_tokens,
                estimator=estimator,
                secrets=secrets,
                max_bytes=max_bytes,
                invalidated_ids=invalidated_ids,
            )

        return from_store(entries)
    return render_recent_message_window_from_entries(
        entries,
        keep_recent_entries,
        max_tokens=max_tokens,
        estimator=estimator,
        secrets=secrets,
        max_bytes=max_bytes,
        invalidated_ids=invalidated_ids,
    )


@overload
def build_observational_memory_context_blocks(
    entries: Sequence[SessionEntry],
    *,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    recent_message_max_tokens: int | None = None,
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    estimator: TokenEstimator | None = None,
    passive: bool = False,
    scope_map: WorkScopeMap | None = None,
) -> list[ContextBlock]: ...


@overload
def build_observational_memory_context_blocks(
    entries: SessionStore,
    *,
    session_id: str,
    leaf_id: str | None = None,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    recent_message_max_tokens: int | None = None,
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    estimator: TokenEstimator | None = None,
    passive: bool = False,
    scope_map: WorkScopeMap | None = None,
) -> Awaitable[list[ContextBlock]]: ...


def build_observational_memory_context_blocks(
    entries: Sequence[SessionEntry] | SessionStore,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    recent_message_max_tokens: int | None = None,
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    estimator: TokenEstimator | None = None,
    passive: bool = False,
    scope_map: WorkScopeMap | None = None,
) -> list[ContextBlock] | Awaitable[list[ContextBlock]]:
    """The context blocks for a branch, in injection order.

    Given entries (root first): O(n), pure. Given a store and ``session_id``: an awaitable
    that reads the branch's ledger and its last ``keep_recent_entries`` messages only.
    """
    if is_store(entries):
        keep = check_keep_recent_entries(keep_recent_entries)
        invalid = frozenset(invalidated_ids or ())
        options = BlockOptions(keep, recent_message_max_tokens, invalid, secrets, estimator)
        sid = store_session(session_id, "build_observational_memory_context_blocks")
        return _context_blocks_from_store(entries, sid, leaf_id, options, passive, scope_map)
    return build_observational_memory_context_blocks_from_entries(
        entries,
        keep_recent_entries=keep_recent_entries,
        recent_message_max_tokens=recent_message_max_tokens,
        invalidated_ids=invalidated_ids,
        secrets=secrets,
        estimator=estimator,
        passive=passive,
        scope_map=scope_map,
    )


async def _context_blocks_from_store(
    store: SessionStore,
    session_id: str,
    leaf_id: str | None,
    options: BlockOptions,
    passive: bool,
    scope_map: WorkScopeMap | None,
) -> list[ContextBlock]:
    if passive:
        return []

    async def reads() -> list[ContextBlock]:
        ledger = await withholding_ledger(store, session_id, options.invalidated_ids, leaf_id)
        recent = await store.recent_messages(session_id, options.keep_recent_entries, leaf_id)
        scopes = scope_map if scope_map is not None else await store.scope_map(session_id, leaf_id)
        return context_blocks_from_parts(ledger, recent, options, scope_map=scopes)

    # One unit: on SQLite, one thread hop for the three reads together.
    return await read_together(store, reads)


@overload
def recall_observational_memory(
    entries: Sequence[SessionEntry],
    memory_id: str,
    *,
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    extra_ledgers: Sequence[ObservationalMemoryLedger] | None = None,
    sources_offset: int = 0,
    sources_limit: int | None = None,
) -> MemoryRecall: ...


@overload
def recall_observational_memory(
    entries: SessionStore,
    memory_id: str,
    *,
    session_id: str,
    leaf_id: str | None = None,
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    extra_ledgers: Sequence[ObservationalMemoryLedger] | None = None,
    sources_offset: int = 0,
    sources_limit: int | None = None,
) -> Awaitable[MemoryRecall]: ...


def recall_observational_memory(
    entries: Sequence[SessionEntry] | SessionStore,
    memory_id: str,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    extra_ledgers: Sequence[ObservationalMemoryLedger] | None = None,
    sources_offset: int = 0,
    sources_limit: int | None = None,
) -> MemoryRecall | Awaitable[MemoryRecall]:
    """Recall one memory id with its exact source entries.

    Given the branch's entries (root first): pure, O(n). Given a store and ``session_id``:
    an awaitable that reads the branch's ledger and then each source with ``store.get``,
    never the branch itself. See ``recall_observational_memory_from_entries``.
    """
    if is_store(entries):
        return recall_observational_memory_from_store(
            entries,
            store_session(session_id, "recall_observational_memory"),
            memory_id,
            leaf_id=leaf_id,
            invalidated_ids=invalidated_ids,
            secrets=secrets,
            extra_ledgers=extra_ledgers,
            sources_offset=sources_offset,
            sources_limit=sources_limit,
        )
    return recall_observational_memory_from_entries(
        entries,
        memory_id,
        invalidated_ids=invalidated_ids,
        secrets=secrets,
        extra_ledgers=extra_ledgers,
        sources_offset=sources_offset,
        sources_limit=sources_limit,
    )


@overload
def recall_observational_memory_branch_page(
    entries: Sequence[SessionEntry],
    cursor: str,
    *,
    limit: int | None = None,
    direction: PageDirection = "forward",
    detail: PageDetail = "summary",
    secrets: Iterable[str] | Redactor | None = None,
    default_limit: int = PAGE_LIMIT_DEFAULT,
    invalidated_ids: Iterable[str] | None = None,
) -> BranchPage: ...


@overload
def recall_observational_memory_branch_page(
    entries: SessionStore,
    cursor: str,
    *,
    session_id: str,
    leaf_id: str | None = None,
    limit: int | None = None,
    direction: PageDirection = "forward",
    detail: PageDetail = "summary",
    secrets: Iterable[str] | Redactor | None = None,
    default_limit: int = PAGE_LIMIT_DEFAULT,
    invalidated_ids: Iterable[str] | None = None,
) -> Awaitable[BranchPage]: ...


def recall_observational_memory_branch_page(
    entries: Sequence[SessionEntry] | SessionStore,
    cursor: str,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
    limit: int | None = None,
    direction: PageDirection = "forward",
    detail: PageDetail = "summary",
    secrets: Iterable[str] | Redactor | None = None,
    default_limit: int = PAGE_LIMIT_DEFAULT,
    invalidated_ids: Iterable[str] | None = None,
) -> BranchPage | Awaitable[BranchPage]:
    """Page eligible messages after (``forward``) or before (``backward``) ``cursor``.

    Given the branch's entries (root first): pure, O(n). Given a store and ``session_id``:
    an awaitable over ``store.page_messages()``, an indexed query on an indexed store.
    """
    if is_store(entries):
        return recall_observational_memory_branch_page_from_store(
            entries,
            # store_session's None check alone: the page validates the id itself, once.
            session_id
            if session_id is not None
            else store_session(session_id, "recall_observational_memory_branch_page"),
            cursor,
            leaf_id=leaf_id,
            limit=limit,
            direction=direction,
            detail=detail,
            secrets=secrets,
            default_limit=default_limit,
            invalidated_ids=invalidated_ids,
        )
    return recall_observational_memory_branch_page_from_entries(
        entries,
        cursor,
        limit=limit,
        direction=direction,
        detail=detail,
        secrets=secrets,
        default_limit=default_limit,
        invalidated_ids=invalidated_ids,
    )
