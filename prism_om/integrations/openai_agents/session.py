"""``PrismSession``: the Agents SDK ``Session`` protocol over a prism-om store."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, cast

from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings

from ...attach import ObservationalMemory, ObservationalMemoryContextProvider
from ...core.branch_snapshot import BranchSnapshot
from ...core.context_blocks import RECENT_MESSAGES_BLOCK_NAME
from ...entries import SessionEntry, custom_entry, validate_session_id
from ...errors import InvalidInputError, StoreClosedError
from ...host.context import render_system
from ...observational_memory.recall_tool import RecallMemoryTool
from ...observational_memory.search import SearchMemoryTool, create_search_memory_tool
from ...providers.base import CredentialResolver, Provider
from ...session import Session
from ...stores import SessionStore, open_store
from ...workers.model import Model
from ...workers.runtime import FlushResult, ObservationalMemoryRuntime
from ..conversation import check_store_and_memory, find_call, memory_parts
from .items import (
    ITEM_TYPE,
    ROOT_TYPE,
    entry_for_item,
    item_of,
    items_of_marked,
    normalize_items,
    withheld_item,
)

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["PrismSession", "check_limit"]

POST_ADD_ERROR: Final = "observational-memory:post-run-error"


def check_limit(limit: object, name: str = "limit") -> int | None:
    """``limit`` when it is None or a positive int (a bool is not), else InvalidInputError."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise InvalidInputError(f"{name} must be None or a positive integer, got {limit!r}")
    return limit


class PrismSession:
    """An OpenAI Agents SDK session (``agents.memory.Session``) stored in a prism-om store.

    ``store`` is a store URL (``sqlite:agent.db``, ``jsonl:dir``, ``memory:``,
    ``postgresql://...``; opened on first use and closed by ``close()``) or an open
    ``SessionStore`` (left open). Items round-trip exactly as ``SQLiteSession`` keeps them
    (as JSON gives them back), one entry per item; how each is stored is in
    ``prism_om.integrations.openai_agents.items``. Without memory, ``get_items()`` reads
    the item entries' payloads alone (``SessionStore.marked_data``: on SQL stores their
    payload columns, one row per item, no entry built). The session id must be a prism-om
    session id (``InvalidSessionIdError`` otherwise).

    History is a branch of the session's entry tree, so nothing is ever deleted:
    ``pop_item()`` moves the session's leaf back to the popped item's parent (the item
    stays in the store, on its own branch) and ``clear_session()`` moves it back to the
    session's root (an ``openai-agents.session`` marker written with the first items), so
    the next ``add_items`` starts a new branch. Memory records made after that point stay
    on the branch left behind: the new leaf's ledger and context no longer have them.

    With ``memory=create_observational_memory(...)`` each ``add_items`` runs the observe /
    reflect / drop pipeline afterwards, as ``attach()`` does (awaited, or in the background
    with ``background=True``; ``drain()`` waits for it; a worker failure never fails the
    call, it goes to the debug sink). ``get_items()`` then returns the rendered memory as
    one leading ``system`` item followed by the recent window: the last
    ``context.recent_messages`` messages, reaching back to every item the observer has not
    covered yet (nothing is in neither), to the call of any output in it (the API refuses
    an output without its call) and to a reasoning item right before it. ``get_items(limit)``
    still returns the exact last ``limit`` items, which the SDK uses to check its own
    writes; leave ``session_settings.limit`` unset with memory. Items of revoked entries
    (the memory's ``invalidated_ids``) read as ``[revoked] <id>``. A passive memory records
    but changes no read.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: SessionStore | str,
        *,
        memory: ObservationalMemory | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        session_model: Model | str | Mapping[str, Any] | None = None,
        credential_resolver: CredentialResolver | None = None,
        providers: Mapping[str, Provider] | None = None,
    ) -> None:
        self.session_id = validate_session_id(session_id)
        self._url, self._store = check_store_and_memory(store, memory)
        if session_settings is None:
            session_settings = SessionSettings()
        elif isinstance(session_settings, Mapping):
            session_settings = dict(session_settings)
        self.session_settings = coerce_session_settings(session_settings)
        check_limit(self.session_settings.limit, "session_settings.limit")
        self.memory = memory
        self._worker_options: dict[str, Any] = {
            "session_model": session_model,
            "credential_resolver": credential_resolver,
            "providers": providers,
        }
        self._runtime: ObservationalMemoryRuntime | None = None
        self._provider: ObservationalMemoryContextProvider | None = None
        self._session: Session | None = None
        self._recall: RecallMemoryTool | None = None
        self._root_id: str | None = None
        self._started = False  # the session is known to have entries
        self._opening = asyncio.Lock()
        self._writing = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.last_flush: FlushResult | None = None
        if self._store is not None:
            self._wire(self._store)  # a bad worker setting fails here, not on first use

    def __repr__(self) -> str:
        where = self._url if self._store is None else self._store.url
        return f"PrismSession({self.session_id!r}, store={where!r})"

    # -- the Session protocol ---------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; the last ``limit`` of them when given.

        ``limit`` (else ``session_settings.limit``) is None or a positive int, else
        ``InvalidInputError``. With memory and no limit: the memory, then the recent window.
        """
        wanted = check_limit(limit)
        if wanted is None:
            wanted = self.session_settings.limit if self.session_settings else None
        store = await self._ready()
        if wanted is None and self._memory_view:
            items = await self._memory_items(store)
        elif wanted is None and self.memory is None:
            # Nothing is withheld without memory: the item rows' payloads are the answer,
            # read alone (no entry model; fresh objects to hand out).
            items = items_of_marked(await store.marked_data(self.session_id, ITEM_TYPE))
        else:
            items = await self._read_items(await self._tail(store, wanted))
            items = items if wanted is None else items[-wanted:]
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items as one batch (all stored, or none), then run memory work."""
        normalized = normalize_items(items)
        store = await self._ready()
        if not normalized:
            return
        batch = [
            entry_for_item(self.session_id, item, index=index)
            for index, item in enumerate(normalized)
        ]
        async with self._writing:
            held = None if self._provider is None else self._provider.view.snapshot
            # Once the session has entries it keeps them (nothing here deletes any), so
            # whether it is new is read once, not on every call.
            known = self._started or (held is not None and held.leaf_id is not None)
            if not known and await store.leaf(self.session_id) is None:
                # A new session starts at a marker, the point clear_session() returns to.
                batch.insert(0, custom_entry(self.session_id, {"type": ROOT_TYPE, "version": 1}))
            stored = await store.append_at_leaf(batch)
            self._started = True
            # The batch moves the branch's snapshot on without a read (see BranchView).
            snapshot = None if self._provider is None else self._provider.view.advance(stored)
        await self._after_add(snapshot)

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the newest item off the session and return it (None when it is empty).

        Nothing is deleted: the leaf moves to the entry before the item, and the item (with
        any memory recorded after it) stays in the store on the branch left behind.
        """
        store = await self._ready()
        async with self._writing:
            await self.drain()
            tail = await self._tail(store, 1)
            found = next((e for e in reversed(tail) if item_of(e) is not None), None)
            if found is None:
                return None
            start = await self._item_start(store, found)
            if start.parent_id is None:
                raise InvalidInputError(
                    f"item entry {start.id!r} is the root of session {self.session_id!r}: "
                    "it cannot be popped",
                    entry_id=start.id,
                    session_id=self.session_id,
                )
            await store.checkout(self.session_id, start.parent_id)
            popped = await self._read_items([found])
        return cast("TResponseInputItem", popped[0]) if popped else None

    async def clear_session(self) -> None:
        """Make the session read as empty: the leaf moves back to the session's root.

        The history stays in the store, on the branch left behind; the next ``add_items``
        starts a new branch from the root.
        """
        store = await self._ready()
        async with self._writing:
            await self.drain()
            if await store.leaf(self.session_id) is None:
                return
            if self._root_id is None:
                # Clearing is rare; the root never changes, so it is read once.
                self._root_id = (await store.entries(self.session_id))[0].id
            await store.checkout(self.session_id, self._root_id)

    # -- memory -----------------------------------------------------------------------

    @property
    def runtime(self) -> ObservationalMemoryRuntime | None:
        """The memory worker runtime (after first use), or None without memory."""
        return self._runtime

    async def flush(self, **options: Any) -> FlushResult | None:
        """Run the memory pipeline now (``runtime.flush`` options); None without memory."""
        await self._ready()
        return None if self._runtime is None else await self._runtime.flush(**options)

    async def drain(self) -> None:
        """Wait for the background memory work scheduled so far."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def recall_memory_tool(self) -> RecallMemoryTool:
        """The ``recall`` tool over this session's store (memory's secrets, page limit and
        invalidation set, as ``attached.recall_tool()``)."""
        await self._ready()
        assert self._recall is not None
        return self._recall

    async def search_memory_tool(self) -> SearchMemoryTool:
        """The opt-in ``search_memory`` tool over this session's store (memory's secrets
        and invalidation set, as ``attached.search_tool()``): ranked search of its memory
        and messages, whose hits carry the ids ``recall_memory_tool()`` expands."""
        store = await self._ready()
        memory, provider = self.memory, self._provider
        if memory is None or provider is None:
            return create_search_memory_tool(store=store)
        return create_search_memory_tool(
            store=store, secrets=memory.secrets, invalidated_ids=provider.invalidated
        )

    # -- lifecycle ----------------------------------------------------------------------

    async def close(self) -> None:
        """Wait for background memory work; close the store if this session opened it."""
        await self.drain()
        self._closed = True
        if self._url is not None and self._store is not None:
            await self._store.close()

    async def __aenter__(self) -> PrismSession:
        await self._ready()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- internals ----------------------------------------------------------------------

    @property
    def _memory_view(self) -> bool:
        return self.memory is not None and not self.memory.settings.passive

    async def _ready(self) -> SessionStore:
        if self._closed:
            raise StoreClosedError(
                f"PrismSession {self.session_id!r} is closed", session_id=self.session_id
            )
        if self._recall is not None and self._store is not None:
            return self._store
        async with self._opening:
            if self._store is None:
                assert self._url is not None
                self._store = await open_store(self._url)
            if self._recall is None:
                self._wire(self._store)
        return self._store

    def _wire(self, store: SessionStore) -> None:
        # The same parts attach() builds for a prism_om host agent.
        self._session, self._runtime, self._provider, self._recall = memory_parts(
            store, self.session_id, self.memory, **self._worker_options
        )

    async def _after_add(self, snapshot: BranchSnapshot | None) -> None:
        if self._runtime is None:
            return
        assert self.memory is not None
        if self.memory.background:
            task = asyncio.get_running_loop().create_task(self._flush_quietly(snapshot))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            await self._flush_quietly(snapshot)

    async def _flush_quietly(self, snapshot: BranchSnapshot | None) -> None:
        assert self._runtime is not None and self._provider is not None
        try:
            # From the snapshot's counters: no store read when no worker is due.
            self.last_flush = await self._runtime.flush(snapshot=snapshot)
            if self.last_flush.entry_ids:
                self._provider.view.forget()
        except Exception as exc:  # memory work never fails the SDK's turn: it is reported
            error = f"{type(exc).__name__}: {exc}"
            self._runtime.emit_debug_event(POST_ADD_ERROR, {"error": error})

    async def _tail(self, store: SessionStore, count: int | None) -> list[SessionEntry]:
        """Branch entries holding at least the last ``count`` items (all when None).

        Each item with a message meaning is a message entry (before version 7: a message
        entry and then the item's own), so the entries from the ``count``-th newest
        message on hold ``count`` items; the store reads them by index.
        """
        sid = self.session_id
        if count is None:
            return await store.entries(sid)
        messages = await store.recent_messages(sid, count)
        if len(messages) == count and messages[0].parent_id is not None:
            tail = await store.entries_after(sid, messages[0].parent_id)
            if sum(1 for e in tail if e.custom_type == ITEM_TYPE) >= count:
                return tail
        return await store.entries(sid)

    async def _item_start(self, store: SessionStore, entry: SessionEntry) -> SessionEntry:
        """The first entry of an item: itself, or (an item stored before version 7) its
        message entry right before it."""
        assert entry.data is not None
        message_id = entry.data.get("messageId")
        if message_id is not None and message_id == entry.parent_id:
            message = await store.get(message_id)
            if message is not None:
                return message
        return entry

    async def _invalidated(self) -> frozenset[str]:
        return frozenset() if self._provider is None else await self._provider.invalidated()

    async def _read_items(
        self,
        entries: Sequence[SessionEntry],
        drop_calls: frozenset[str] = frozenset(),
        invalid: frozenset[str] | None = None,
    ) -> list[dict[str, Any]]:
        """The items of ``entries`` in order, revoked ones withheld."""
        if invalid is None:
            invalid = await self._invalidated()
        items: list[dict[str, Any]] = []
        for entry in entries:
            item = item_of(entry)
            if item is None:
                continue
            output = item.get("type") == "function_call_output"
            if output and drop_calls and item.get("call_id") in drop_calls:
                continue
            assert entry.data is not None
            revoked = {entry.id, entry.data.get("messageId")} & invalid
            if revoked:
                shown = withheld_item(item, str(entry.data.get("messageId") or entry.id))
                if shown is not None:
                    items.append(shown)
                continue
            items.append(item)
        return items

    async def _memory_items(self, store: SessionStore) -> list[dict[str, Any]]:
        assert self._provider is not None and self._session is not None
        invalid = await self._invalidated()
        view = self._provider.view
        # One snapshot of the branch (or only a leaf check when nothing moved since).
        snapshot = await view.read(self._session, full=bool(invalid))
        built = view.blocks(snapshot, invalid)
        memory = [b for b in built.blocks if b.name != RECENT_MESSAGES_BLOCK_NAME]
        shown = built.window.rendered.entries if built.window.rendered is not None else ()
        # The window's items: from its first message on (every message the observer has
        # not covered is in it, so nothing is in neither the memory nor the items).
        window = list(snapshot.tail)
        first = shown[0].id if shown else None
        if first is not None and all(e.id != first for e in window):
            window = await self._entries_from(store, first)
        window, unanswered = await self._with_calls(store, window)
        window = await self._with_reasoning(store, window)
        items = await self._read_items(window, unanswered, invalid)
        text = render_system("", memory)
        if not text:
            return items
        cursor = next((e.id for e in window if e.kind == "message"), None)
        if cursor is not None:
            text += (
                f"\n\nMessages before this conversation's window: recall with cursor "
                f"{cursor!r} and direction 'backward'."
            )
        return [{"role": "system", "content": text}, *items]

    async def _entries_from(self, store: SessionStore, entry_id: str) -> list[SessionEntry]:
        """Branch entries from ``entry_id`` (included) to the leaf."""
        entry = await store.get(entry_id)
        if entry is None or entry.parent_id is None:
            return await store.entries(self.session_id)
        return await store.entries_after(self.session_id, entry.parent_id)

    async def _with_calls(
        self, store: SessionStore, window: list[SessionEntry]
    ) -> tuple[list[SessionEntry], frozenset[str]]:
        """The window reaching back to the call of every output in it.

        Returns the window and the call ids no call was found for (their outputs are left
        out: the API refuses an output whose call it was not given).
        """
        while True:
            called: set[str] = set()
            unanswered: set[str] = set()
            for entry in window:
                item = item_of(entry) or {}
                call_id = str(item.get("call_id"))
                if item.get("type") == "function_call":
                    called.add(call_id)
                elif item.get("type") == "function_call_output" and call_id not in called:
                    unanswered.add(call_id)
            if not unanswered:
                return window, frozenset()
            cursor = next((e.id for e in window if e.kind == "message"), None)
            call = (
                None
                if cursor is None
                else await find_call(store, self.session_id, cursor, unanswered)
            )
            if call is None:
                return window, frozenset(unanswered)
            window = await self._entries_from(store, call.id)

    async def _with_reasoning(
        self, store: SessionStore, window: list[SessionEntry]
    ) -> list[SessionEntry]:
        """The window with the reasoning items right before it (an output needs its own)."""
        while window and window[0].parent_id is not None:
            before = await store.get(window[0].parent_id)
            item = None if before is None else item_of(before)
            if before is None or item is None or item.get("type") != "reasoning":
                break
            window = [before, *window]
        return window
