"""An outside adapter over plain dicts, written from ``StoreBase``'s docstring alone.

``DictStore`` implements only the ``SessionTree`` operations, with the public helpers
``StoreBase`` names, and inherits every memory and branch read. Unlike ``TreeOnlyStore``
(which forwards to a ``MemoryStore``), it keeps no index and its writes never yield to the
event loop, so a cancelled write is either never started or already done: the conformance
suites run over it to show the cancellation rule holds for such a store too. Copy it to
start an adapter.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from ..core.records import is_memory_record
from ..core.timestamps import utc_timestamp
from ..core.validation import validate_memory_record_on_branch
from ..entries import SessionEntry, validate_session_id
from ..errors import (
    DuplicateEntryError,
    EntryNotFoundError,
    MemoryRecordError,
    RootExistsError,
    SessionMismatchError,
    UnknownParentError,
)
from ..stores.arguments import check_entry_id, check_expected_memory_head, check_leaf_id
from ..stores.base import (
    ANY_MEMORY_HEAD,
    AnyMemoryHead,
    SessionSummary,
    StoreBase,
    chain_at_leaf,
    check_batch_shape,
    check_memory_head,
    session_not_found,
)

__all__ = ["DictStore"]


class DictStore(StoreBase):
    """Entries in dicts; a write runs start to end without an ``await``."""

    def __init__(self, url: str = "memory:dict") -> None:
        super().__init__()
        self.url = url
        self._by_id: dict[str, SessionEntry] = {}
        self._order: dict[str, builtins.list[str]] = {}  # per session, append order
        self._leaf: dict[str, str] = {}
        self._has_child: set[str] = set()

    # -- writes: check everything, then the fault point, then store -----------------------

    def _place(self, batch: builtins.list[SessionEntry]) -> None:
        pending: dict[str, SessionEntry] = {}
        for entry in batch:
            context = {"entry_id": entry.id, "session_id": entry.session_id, "url": self.url}
            if entry.id in self._by_id:
                raise DuplicateEntryError(f"entry id {entry.id!r} already exists", **context)
            if entry.parent_id is None:
                if self._order.get(entry.session_id) or any(
                    e.parent_id is None for e in pending.values()
                ):
                    raise RootExistsError(
                        f"entry {entry.id!r}: session {entry.session_id!r} has a root",
                        **context,
                    )
                path: builtins.list[SessionEntry] = []
            else:
                parent = pending.get(entry.parent_id) or self._by_id.get(entry.parent_id)
                if parent is None:
                    raise UnknownParentError(
                        f"entry {entry.id!r}: parent {entry.parent_id!r} is not in the store",
                        **context,
                    )
                if parent.session_id != entry.session_id:
                    raise SessionMismatchError(
                        f"entry {entry.id!r}: parent {parent.id!r} is of session "
                        f"{parent.session_id!r}",
                        **context,
                    )
                path = self._path(parent.id, pending)
            try:
                validate_memory_record_on_branch(entry, path)
            except MemoryRecordError as exc:
                exc.add_context(url=self.url)
                raise
            pending[entry.id] = entry
        self._append_fault_point(batch)
        for entry in batch:
            self._by_id[entry.id] = entry
            self._order.setdefault(entry.session_id, []).append(entry.id)
            if entry.parent_id is not None:
                self._has_child.add(entry.parent_id)
        if batch:
            self._leaf[batch[0].session_id] = batch[-1].id

    def _path(
        self, leaf_id: str, pending: dict[str, SessionEntry] | None = None
    ) -> builtins.list[SessionEntry]:
        path: builtins.list[SessionEntry] = []
        entry_id: str | None = leaf_id
        while entry_id is not None:
            entry = (pending or {}).get(entry_id) or self._by_id[entry_id]
            path.append(entry)
            entry_id = entry.parent_id
        return path[::-1]

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        batch = check_batch_shape(entries, url=self.url)
        self._check_open()
        self._place(batch)

    async def append_at_leaf(
        self,
        entries: Sequence[SessionEntry],
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> builtins.list[SessionEntry]:
        batch = check_batch_shape(entries, url=self.url)
        expected_memory_head = check_expected_memory_head(expected_memory_head)
        self._check_open()
        if not batch:
            return []
        session_id = batch[0].session_id
        # No await from here on: nothing else runs between the compare and the append.
        leaf = self._leaf.get(session_id)
        head = None if leaf is None else self._head(self._path(leaf))
        check_memory_head(session_id, expected_memory_head, head)
        batch = chain_at_leaf(batch, leaf)
        self._place(batch)
        return batch

    async def checkout(self, session_id: str, entry_id: str) -> None:
        check_entry_id(entry_id)
        self._check_open()
        self._resolve(validate_session_id(session_id), entry_id)
        self._leaf[session_id] = entry_id

    async def delete_session(self, session_id: str) -> int:
        self._check_open()
        order = self._order.get(validate_session_id(session_id))
        if not order:
            raise session_not_found(session_id, self.url)
        # No await: the whole session goes at once.
        for entry_id in order:
            self._by_id.pop(entry_id)
            self._has_child.discard(entry_id)
        del self._order[session_id]
        self._leaf.pop(session_id, None)
        self._forget_cached()
        return len(order)

    async def close(self) -> None:
        self._closed = True

    # -- reads ----------------------------------------------------------------------------

    def _resolve(self, session_id: str, entry_id: str) -> SessionEntry:
        entry = self._by_id.get(entry_id)
        context = {"entry_id": entry_id, "session_id": session_id, "url": self.url}
        if entry is None:
            raise EntryNotFoundError(f"entry {entry_id!r} is not in the store", **context)
        if entry.session_id != session_id:
            raise SessionMismatchError(
                f"entry {entry_id!r} belongs to session {entry.session_id!r}, not {session_id!r}",
                **context,
            )
        return entry

    @staticmethod
    def _head(path: builtins.list[SessionEntry]) -> str | None:
        return next((e.id for e in reversed(path) if is_memory_record(e)), None)

    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None:
        return self._head(await self.entries(session_id, leaf_id))

    async def get(self, entry_id: str) -> SessionEntry | None:
        self._check_open()
        return self._by_id.get(check_entry_id(entry_id))

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        self._check_open()
        return [self._by_id[i] for i in self._order.get(validate_session_id(session_id), [])]

    async def entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        self._check_open()
        validate_session_id(session_id)
        check_leaf_id(leaf_id)
        leaf = self._leaf.get(session_id) if leaf_id is None else leaf_id
        if leaf is None:
            return []
        return self._path(self._resolve(session_id, leaf).id)

    async def leaves(self, session_id: str) -> builtins.list[str]:
        self._check_open()
        order = self._order.get(validate_session_id(session_id), [])
        return [i for i in order if i not in self._has_child]

    async def leaf(self, session_id: str) -> str | None:
        self._check_open()
        return self._leaf.get(validate_session_id(session_id))

    async def sessions(self) -> builtins.list[str]:
        self._check_open()
        return builtins.list(self._order)

    async def session_summaries(self) -> builtins.list[SessionSummary]:
        self._check_open()
        summaries = []
        for session_id, order in self._order.items():
            listed = [self._by_id[i] for i in order]
            times = filter(None, (utc_timestamp(e.timestamp) for e in listed))
            summaries.append(
                SessionSummary(
                    session_id=session_id,
                    entries=len(listed),
                    messages=sum(1 for e in listed if e.kind == "message"),
                    leaves=sum(1 for i in order if i not in self._has_child),
                    last_activity=max(times, default=None),
                )
            )
        return summaries
