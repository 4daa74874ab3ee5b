"""Reading a JSONL session file into the segment index: lines checked and placed, message
bodies left on disk until read (``LazyEntries``), a valid index sidecar taken instead of
parsing what it covers. Damage is a ``CorruptStoreError`` naming the file and line."""

from __future__ import annotations

import builtins
import contextlib
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..._gc import collector_paused
from ...entries import SessionEntry, entry_from_wire
from ...errors import CorruptStoreError, InvalidEntryError, StoreError, StoreRuleError
from ..segment_index.lazy_entries import LazyEntries, Span
from .files import _READ_FLAGS, _RUN_BYTES, DATA_SUFFIX, _file_names, _FileState, _io, _read_all
from .index_sidecar import apply_index, index_name, kind_of, read_index

if TYPE_CHECKING:
    from .store import JsonlStore

__all__ = ["corrupt_line", "lazy", "load_chunk", "load_line", "read_lines"]


def load_chunk(
    store: JsonlStore, sid: str, state: _FileState, chunk: bytes, *, trusted: bool
) -> None:
    """Apply the complete lines of ``chunk`` (the file from ``state.loaded`` on)."""
    with collector_paused():
        if state.loaded == 0 and state.lines == 0:
            chunk = chunk[load_indexed(store, sid, state, chunk) :]
        load_lines(store, sid, state, chunk, trusted=trusted)


def load_indexed(store: JsonlStore, sid: str, state: _FileState, data: bytes) -> int:
    """Load the prefix of ``data`` a trusted index sidecar describes; its length."""
    try:
        raw = store._read_file(index_name(sid), 0)
    except StoreError:
        return 0  # a link or an unreadable file: not ours to trust
    found = read_index(raw, sid, data) if raw else None
    if found is None:
        return 0

    def parse(at: int) -> SessionEntry | None:
        try:
            return entry_from_wire(found.line(at), where="entry")
        except InvalidEntryError:
            return None

    if not apply_index(store._index, sid, found, parse):
        return 0  # nothing was applied: the lines are read one by one instead
    state.loaded = found.length
    state.lines = state.indexed = len(found.ids)
    state.parents = found.parents
    state.kinds = list(found.kinds)
    if found.tokens is not None and found.encoding is not None:
        # Counts for the bytes the digest vouched for: branch_tokens reads them as its
        # own (each entry's text never changes).
        counted = store._token_cache.setdefault(found.encoding, {})
        for entry_id, kind, count in zip(found.ids, found.kinds, found.tokens, strict=True):
            if kind != "x":
                counted.setdefault(entry_id, count)
    return found.length


def read_lines(store: JsonlStore, sid: str, spans: Sequence[Span]) -> builtins.list[SessionEntry]:
    """The messages whose lines lie at ``spans`` of the session's file (``LazyEntries``):
    one open, one ``pread`` per run of adjacent lines."""
    data_name, _ = _file_names(sid)
    out: builtins.list[SessionEntry] = []
    with _io(f"reading {store._where(data_name)}"):
        fd = os.open(data_name, _READ_FLAGS, dir_fd=store._dir_fd)
        try:
            at = 0
            while at < len(spans):
                start = end = spans[at][1]
                run = at
                while run < len(spans) and spans[run][1] == end and end - start < _RUN_BYTES:
                    end += spans[run][2] + 1
                    run += 1
                if run == at:  # a line longer than a run: read on its own
                    run, end = at + 1, start + spans[at][2]
                block = _read_all(fd, start, end - start)
                for entry_id, offset, length in spans[at:run]:
                    line = block[offset - start : offset - start + length]
                    out.append(parse_kept(store, entry_id, line))
                at = run
        finally:
            os.close(fd)
    return out


def parse_kept(store: JsonlStore, entry_id: str, line: bytes) -> SessionEntry:
    """An entry whose line a load placed without keeping it (``LazyEntries``)."""
    try:
        entry = entry_from_wire(line, where="entry")
        if entry.id == entry_id:
            return entry
        problem = f"holds entry {entry.id!r} where its index has {entry_id!r}"
    except InvalidEntryError as exc:
        problem = str(exc)
    for sid, tree in store._index.trees.items():
        if entry_id in tree.order:
            number = tree.order.index(entry_id) + 1
            raise corrupt_line(store, sid, number, f"{problem} (run 'prism-om check')")
    raise CorruptStoreError(f"entry {entry_id!r}: {problem}", url=store.url)


def load_lines(
    store: JsonlStore, sid: str, state: _FileState, chunk: bytes, *, trusted: bool
) -> None:
    pos = 0
    if state.open_line:
        if not trusted and not chunk.rstrip(b"\0").strip():
            return  # still only the padding after the unterminated entry
        if not chunk.startswith(b"\n"):
            raise corrupt_line(store, sid, state.lines, "text continues after a complete entry")
        pos, state.loaded, state.open_line = 1, state.loaded + 1, False
    end = chunk.rfind(b"\n") + 1
    if end > pos:
        load_complete_lines(store, sid, state, chunk[pos:end])
        pos = end
    if pos < len(chunk) and not trusted:
        load_tail(store, sid, state, chunk[pos:])


def load_tail(store: JsonlStore, sid: str, state: _FileState, tail: bytes) -> None:
    """An unterminated last line: an interrupted append unless it is a whole entry."""
    body = tail.rstrip(b"\0")  # NUL padding: blocks a crash allocated but never wrote
    if not body.strip():
        return
    try:
        json.loads(body)
    except ValueError:  # cut mid-line or mid-character: the next writer truncates it
        return
    load_line(store, sid, state, body)
    state.loaded += len(body)
    state.open_line = True


def load_complete_lines(store: JsonlStore, sid: str, state: _FileState, lines: bytes) -> None:
    """``_load_line`` for each line of ``lines`` (which ends in a newline), in one loop.

    The same checks in the same order, with the index's one-entry ``add``; a line
    that is not an entry of this session takes ``_load_line``, which raises its error.
    ``state`` moves past each line applied.
    """
    add = store._index.add
    keep, remember = lazy(store).keep_at, lazy(store).remember
    for line in lines.split(b"\n")[:-1]:
        entry = None
        if line and not line.isspace():
            with contextlib.suppress(InvalidEntryError):
                entry = entry_from_wire(line, where="entry")
        if entry is not None and entry.session_id == sid:
            try:
                add(entry)
            except StoreRuleError as exc:
                raise corrupt_line(store, sid, state.lines + 1, str(exc)) from exc
            if entry.kind == "message":
                keep(entry.id, sid, state.loaded, len(line))
                remember(entry, len(line))
            state.lines += 1
            state.parents.append(entry.parent_id)
            state.kinds.append(kind_of(entry))
        else:
            load_line(store, sid, state, line)  # a blank line, or this line's error
        state.loaded += len(line) + 1


def load_line(store: JsonlStore, sid: str, state: _FileState, line: bytes) -> None:
    number = state.lines + 1
    if line.strip():  # blank lines are tolerated in hand-made files
        try:
            entry = entry_from_wire(line, where="entry")
        except InvalidEntryError as exc:
            raise corrupt_line(store, sid, number, str(exc)) from exc
        if entry.session_id != sid:
            raise corrupt_line(
                store, sid, number, f"entry {entry.id!r} belongs to session {entry.session_id!r}"
            )
        try:
            store._index.add(entry)
        except StoreRuleError as exc:
            raise corrupt_line(store, sid, number, str(exc)) from exc
        if entry.kind == "message":
            lazy(store).keep_at(entry.id, sid, state.loaded, len(line))
            lazy(store).remember(entry, len(line))
        state.parents.append(entry.parent_id)
        state.kinds.append(kind_of(entry))
    state.lines = number


def lazy(store: JsonlStore) -> LazyEntries:
    entries = store._index.entries
    assert isinstance(entries, LazyEntries)  # set in __init__
    return entries


def corrupt_line(store: JsonlStore, sid: str, number: int, problem: str) -> CorruptStoreError:
    return CorruptStoreError(
        f"{store._where(sid + DATA_SUFFIX)} line {number}: {problem}", url=store.url
    )
