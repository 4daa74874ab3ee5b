"""``StoredConversation``: a framework's messages kept in a prism-om session (no framework import).

The LangGraph and PydanticAI integrations store their framework's messages through this
class; each supplies only the mapping of one framework message to *records*. A record is
stored as ordinary message entries (what the observer reads and recall cites) followed by
one custom entry holding the framework's own message as JSON, so reading it back gives the
message exactly as it was given::

    {"type": <record type>, "message": <framework JSON>, "messageIds": [...],
     "calls": [<tool call ids it makes>], "results": [<tool call ids it answers>]}

A record with a ``key`` gets an entry id derived from the session and the key, so the
framework can hand over its whole message list every time and only messages not stored yet
are appended (``known``). The memory view is the one the attached agent and
``PrismSession`` use (``BranchView`` and the request-window rule): the rendered memory plus
the records of the window, which holds every message the observer has not covered and at
least the last ``context.recent_messages``, reaching back to the call of every tool result
in it (a provider refuses a result without its call).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Self

from ..attach import ObservationalMemory, ObservationalMemoryContextProvider
from ..core.branch_snapshot import BranchSnapshot
from ..core.context_blocks import RECENT_MESSAGES_BLOCK_NAME
from ..entries import SessionEntry, custom_entry, message_entry, validate_session_id
from ..errors import InvalidEntryError, InvalidInputError, StoreClosedError
from ..host.context import render_system
from ..observational_memory.recall_tool import RecallMemoryTool, create_recall_memory_tool
from ..providers.base import CredentialResolver, Provider
from ..session import Session
from ..stores import SessionStore, open_store, parse_store_url
from ..workers.model import Model
from ..workers.runtime import FlushResult, ObservationalMemoryRuntime

__all__ = [
    "POST_ADD_ERROR",
    "MemoryView",
    "Record",
    "StoredConversation",
    "StoredRecord",
    "check_store_and_memory",
    "find_call",
    "json_value",
    "memory_parts",
]

POST_ADD_ERROR: Final = "observational-memory:post-run-error"
# How far back (in pages of 100 messages) the window looks for a call its results answer.
_CALL_SEARCH_PAGES: Final = 10


@dataclass(frozen=True)
class Record:
    """One framework message to store: its JSON, and the message entries it reads as."""

    message: Any
    """The framework's message as JSON (what reading the record gives back)."""
    entries: Sequence[Mapping[str, Any]] = ()
    """``message_entry`` keyword arguments (``role``, ``content``, ``tool_calls``,
    ``tool_call_id``), one per message the observer should read; none for a message
    without a message meaning (a system prompt, ...)."""
    key: str | None = None
    """What identifies the message across calls (its id, or a digest): stored once."""


@dataclass(frozen=True)
class StoredRecord:
    """A record as read back from the branch."""

    entry_id: str
    message: Any
    message_ids: tuple[str, ...]
    calls: tuple[str, ...]
    results: tuple[str, ...]
    revoked: bool = False
    """A message entry of the record (or the record) is revoked: show no text."""

    @property
    def shown_id(self) -> str:
        """The id a withheld record names: its first message entry, else itself."""
        return self.message_ids[0] if self.message_ids else self.entry_id


@dataclass(frozen=True)
class MemoryView:
    """What the model is handed: the memory text, then the window's records."""

    memory: str | None
    records: list[StoredRecord]
    unanswered: frozenset[str] = field(default_factory=frozenset)
    """Call ids of results in the window whose call is nowhere on the branch: the
    framework's mapping leaves those results out."""


def check_store_and_memory(
    store: SessionStore | str, memory: ObservationalMemory | None
) -> tuple[str | None, SessionStore | None]:
    """An integration's ``store`` and ``memory`` arguments checked at construction (a bad
    URL fails here, not on first use): ``(url, None)`` for a URL to open later, ``(None,
    store)`` for a store given."""
    if isinstance(store, str):
        parse_store_url(store)
        url: str | None = store
        given: SessionStore | None = None
    elif isinstance(store, SessionStore):
        url, given = None, store
    else:
        raise InvalidInputError(
            f"store must be a store URL or a SessionStore, got {type(store).__name__}"
        )
    if memory is not None and not isinstance(memory, ObservationalMemory):
        raise InvalidInputError(
            "memory must come from prism_om.attach.create_observational_memory()"
        )
    return url, given


def json_value(value: object, where: str) -> Any:
    """``value`` as JSON gives it back, or ``InvalidInputError`` naming ``where``."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{where} is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise InvalidInputError(f"{where} nests too deeply to serialise") from None


class StoredConversation:
    """One prism-om session holding a framework's messages; see the module docstring.

    ``store`` is a store URL (opened on first use, closed by ``close()``) or an open
    ``SessionStore`` (left open). ``memory`` comes from ``create_observational_memory``;
    after each append the observe / reflect / drop pipeline runs (awaited, or in the
    background with ``background=True``); a worker failure never fails the append, it goes
    to the debug sink.
    """

    def __init__(
        self,
        session_id: str,
        store: SessionStore | str,
        *,
        record_type: str,
        root_type: str,
        memory: ObservationalMemory | None = None,
        session_model: Model | str | Mapping[str, Any] | None = None,
        credential_resolver: CredentialResolver | None = None,
        providers: Mapping[str, Provider] | None = None,
    ) -> None:
        self.session_id = validate_session_id(session_id)
        self._url, self._store = check_store_and_memory(store, memory)
        self.memory = memory
        self.record_type = record_type
        self.root_type = root_type
        self._session_model = session_model
        self._credential_resolver = credential_resolver
        self._providers = providers
        self._runtime: ObservationalMemoryRuntime | None = None
        self._provider: ObservationalMemoryContextProvider | None = None
        self._session: Session | None = None
        self._recall: RecallMemoryTool | None = None
        self._opening = asyncio.Lock()
        self._writing = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.last_flush: FlushResult | None = None
        if self._store is not None:
            self._wire(self._store)  # a bad worker setting fails here, not on first use

    def __repr__(self) -> str:
        where = self._url if self._store is None else self._store.url
        return f"{type(self).__name__}({self.session_id!r}, store={where!r})"

    # -- writing ------------------------------------------------------------------------

    def entry_id_for(self, key: str) -> str:
        """The id of the record entry of ``key`` in this session (the same in every process)."""
        digest = hashlib.sha256(f"{self.session_id}\x00{key}".encode()).hexdigest()
        return f"rec-{digest[:40]}"

    async def known(self, key: str) -> bool:
        """Whether the record of ``key`` is stored already."""
        store = await self.ready()
        return await store.get(self.entry_id_for(key)) is not None

    async def append(self, records: Sequence[Record]) -> None:
        """Append the records as one batch (all stored, or none), then run memory work."""
        store = await self.ready()
        if not records:
            return
        batch: list[SessionEntry] = []
        for index, record in enumerate(records):
            batch.extend(self._entries_of(record, index))
        async with self._writing:
            held = None if self._provider is None else self._provider.view.snapshot
            known = held is not None and held.leaf_id is not None
            if not known and await store.leaf(self.session_id) is None:
                # A new session starts at a marker, the point clear() returns to.
                batch.insert(0, custom_entry(self.session_id, {"type": self.root_type}))
            stored = await store.append_at_leaf(batch)
            # The batch moves the branch's snapshot on without a read (see BranchView).
            snapshot = None if self._provider is None else self._provider.view.advance(stored)
        await self._after_add(snapshot)

    def _entries_of(self, record: Record, index: int) -> list[SessionEntry]:
        sid = self.session_id
        entries: list[SessionEntry] = []
        calls: list[str] = []
        results: list[str] = []
        try:
            for fields in record.entries:
                options = dict(fields)
                role, content = options.pop("role"), options.pop("content")
                entries.append(message_entry(sid, role, content, **options))
                calls.extend(str(c["id"]) for c in options.get("tool_calls") or ())
                if options.get("tool_call_id"):
                    results.append(str(options["tool_call_id"]))
            data = {
                "type": self.record_type,
                "message": json_value(record.message, f"message {index}"),
                "messageIds": [e.id for e in entries],
                "calls": calls,
                "results": results,
            }
            entry_id = None if record.key is None else self.entry_id_for(record.key)
            entries.append(custom_entry(sid, data, entry_id=entry_id))
        except InvalidEntryError as exc:
            raise InvalidEntryError(f"message {index}: {exc}", session_id=sid) from None
        return entries

    async def clear(self) -> None:
        """Make the session read as empty: the leaf moves back to the session's root marker.

        Nothing is deleted: the history stays in the store on the branch left behind."""
        store = await self.ready()
        async with self._writing:
            await self.drain()
            if await store.leaf(self.session_id) is None:
                return
            root = (await store.entries(self.session_id))[0]
            await store.checkout(self.session_id, root.id)
            if self._provider is not None:
                self._provider.view.forget()

    # -- reading ------------------------------------------------------------------------

    async def records(self) -> list[StoredRecord]:
        """Every record of the current branch, oldest first (revoked ones marked)."""
        store = await self.ready()
        return self._records(await store.entries(self.session_id), await self._invalidated())

    @property
    def memory_view(self) -> bool:
        """Whether reads hand the model memory + window (memory set and not passive)."""
        return self.memory is not None and not self.memory.settings.passive

    async def view(self) -> MemoryView:
        """The memory and the window's records (every record without memory)."""
        if not self.memory_view:
            return MemoryView(None, await self.records())
        store = await self.ready()
        assert self._provider is not None and self._session is not None
        invalid = await self._invalidated()
        view = self._provider.view
        # One snapshot of the branch (or only a leaf check when nothing moved since).
        snapshot = await view.read(self._session, full=bool(invalid))
        built = view.blocks(snapshot, invalid)
        memory = [b for b in built.blocks if b.name != RECENT_MESSAGES_BLOCK_NAME]
        shown = built.window.rendered.entries if built.window.rendered is not None else ()
        # Every message the observer has not covered is in the window (from its first
        # message on), so nothing is in neither the memory nor the records.
        window = list(snapshot.tail)
        first = shown[0].id if shown else None
        at = next((n for n, e in enumerate(window) if e.id == first), None)
        if first is not None and at is None:
            window = await self._entries_from(store, first)
        elif at is not None:
            window = window[at:]  # the tail may start with the record of a covered message
        window, unanswered = await self._with_calls(store, window)
        records = self._records(window, invalid)
        text = render_system("", memory)
        if text:
            cursor = next((e.id for e in window if e.kind == "message"), None)
            if cursor is not None:
                text += (
                    f"\n\nMessages before this conversation's window: recall with cursor "
                    f"{cursor!r} and direction 'backward'."
                )
        return MemoryView(text or None, records, unanswered)

    def _records(
        self, entries: Sequence[SessionEntry], invalid: frozenset[str]
    ) -> list[StoredRecord]:
        out: list[StoredRecord] = []
        for entry in entries:
            if entry.custom_type != self.record_type or entry.data is None:
                continue
            data = entry.data
            message_ids = tuple(str(i) for i in data.get("messageIds") or ())
            out.append(
                StoredRecord(
                    entry_id=entry.id,
                    message=data.get("message"),
                    message_ids=message_ids,
                    calls=tuple(str(c) for c in data.get("calls") or ()),
                    results=tuple(str(r) for r in data.get("results") or ()),
                    revoked=bool({entry.id, *message_ids} & invalid),
                )
            )
        return out

    async def _entries_from(self, store: SessionStore, entry_id: str) -> list[SessionEntry]:
        """Branch entries from ``entry_id`` (included) to the leaf."""
        entry = await store.get(entry_id)
        if entry is None or entry.parent_id is None:
            return await store.entries(self.session_id)
        return await store.entries_after(self.session_id, entry.parent_id)

    async def _with_calls(
        self, store: SessionStore, window: list[SessionEntry]
    ) -> tuple[list[SessionEntry], frozenset[str]]:
        """The window reaching back to the call of every result in it, and the call ids
        no call was found for."""
        while True:
            called: set[str] = set()
            unanswered: set[str] = set()
            for record in self._records(window, frozenset()):
                unanswered.update(r for r in record.results if r not in called)
                called.update(record.calls)
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

    async def _invalidated(self) -> frozenset[str]:
        return frozenset() if self._provider is None else await self._provider.invalidated()

    # -- memory -------------------------------------------------------------------------

    @property
    def runtime(self) -> ObservationalMemoryRuntime | None:
        """The memory worker runtime (after first use), or None without memory."""
        return self._runtime

    async def flush(self, **options: Any) -> FlushResult | None:
        """Run the memory pipeline now (``runtime.flush`` options); None without memory."""
        await self.ready()
        if self._runtime is None:
            return None
        result = await self._runtime.flush(**options)
        if result.entry_ids and self._provider is not None:
            self._provider.view.forget()
        return result

    async def drain(self) -> None:
        """Wait for the background memory work scheduled so far."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def recall_memory_tool(self) -> RecallMemoryTool:
        """The ``recall`` tool over this session's store (the memory's secrets, page limit
        and invalidation set, as ``attached.recall_tool()``)."""
        await self.ready()
        assert self._recall is not None
        return self._recall

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
        except Exception as exc:  # memory work never fails the framework's turn: reported
            error = f"{type(exc).__name__}: {exc}"
            self._runtime.emit_debug_event(POST_ADD_ERROR, {"error": error})

    # -- lifecycle ----------------------------------------------------------------------

    async def ready(self) -> SessionStore:
        """The open store (opened on first use)."""
        if self._closed:
            raise StoreClosedError(
                f"{type(self).__name__} {self.session_id!r} is closed", session_id=self.session_id
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

    async def close(self) -> None:
        """Wait for background memory work; close the store if this object opened it."""
        await self.drain()
        self._closed = True
        if self._url is not None and self._store is not None:
            await self._store.close()

    async def __aenter__(self) -> Self:
        await self.ready()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _wire(self, store: SessionStore) -> None:
        self._session, self._runtime, self._provider, self._recall = memory_parts(
            store,
            self.session_id,
            self.memory,
            session_model=self._session_model,
            credential_resolver=self._credential_resolver,
            providers=self._providers,
        )


MemoryParts = tuple[
    Session,
    ObservationalMemoryRuntime | None,
    ObservationalMemoryContextProvider | None,
    RecallMemoryTool,
]


def memory_parts(
    store: SessionStore,
    session_id: str,
    memory: ObservationalMemory | None,
    *,
    session_model: Model | str | Mapping[str, Any] | None = None,
    credential_resolver: CredentialResolver | None = None,
    providers: Mapping[str, Provider] | None = None,
) -> MemoryParts:
    """The parts ``attach()`` builds for a prism_om host agent, for a framework's session:
    the session, the worker runtime and the context provider (None without memory), and
    the ``recall`` tool (the memory's secrets, page limit and invalidation set)."""
    session = Session(store, session_id)
    if memory is None:
        return session, None, None, create_recall_memory_tool(store=store)
    from ..workers.model import coerce_model
    from ..workers.runtime import create_observational_memory_runtime

    estimator = memory.token_estimator()
    runtime = create_observational_memory_runtime(
        estimator=estimator,
        session=session,
        append_entry=session.append,
        settings=memory.settings,
        session_model=coerce_model(session_model) if session_model is not None else None,
        credential_resolver=credential_resolver,
        secrets=memory.secrets,
        debug=memory.debug,
        providers=providers,
        invalidated_ids=memory.invalidated_ids,
    )
    provider = ObservationalMemoryContextProvider(
        memory.settings,
        secrets=memory.secrets,
        invalidated_ids=memory.invalidated_ids,
        estimator=estimator,
    )
    recall = create_recall_memory_tool(
        store=store,
        secrets=memory.secrets,
        page_limit=memory.settings.retrieval.page_limit,
        invalidated_ids=provider.invalidated,
    )
    return session, runtime, provider, recall


async def find_call(
    store: SessionStore, session_id: str, cursor: str, call_ids: set[str]
) -> SessionEntry | None:
    """The nearest assistant message before ``cursor`` that makes one of ``call_ids``
    (looking back at most ``_CALL_SEARCH_PAGES`` pages of 100 messages)."""
    for _ in range(_CALL_SEARCH_PAGES):
        page, more = await store.page_messages(session_id, cursor, 100, direction="backward")
        for entry in reversed(page):
            calls = entry.message.tool_calls if entry.message is not None else None
            if calls and any(c.id in call_ids for c in calls):
                return entry
        if not more or not page:
            return None
        cursor = page[0].id
    return None
