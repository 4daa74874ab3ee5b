"""Deleting a JSONL session, and the leftovers of writes and deletes that never finished.

A delete commits its intent first (the sidecar's ``deleting`` body), then zeroes and
removes the files; a process killed at any step leaves debris the next writer (or a
retried delete) finishes (``sweep_debris``). Run on ``JsonlStore``'s worker thread,
under its lock."""

from __future__ import annotations

import builtins
import contextlib
import os
import stat
from typing import TYPE_CHECKING

from ...errors import StoreError
from ..base import session_not_found
from .files import (
    _ZERO_CHUNK,
    SIDECAR_SUFFIX,
    _deleting_body,
    _file_names,
    _fsync_dir,
    _io,
)
from .id_index import IDS_NAME
from .index_sidecar import index_name

if TYPE_CHECKING:
    from .store import JsonlStore

__all__ = ["backfill_sidecars", "delete_sync", "finish_delete", "remove_debris", "sweep_debris"]


def delete_sync(store: JsonlStore, sid: str) -> int:
    data_name, _ = _file_names(sid)
    with store._locked(exclusive=True):
        store._finished.clear()
        # Either finishes an interrupted delete of this session (its count is the
        # answer: the retry did the erasing) or of another one.
        remove_debris(store)
        store._refresh()
        store._load_quietly(sid)  # damage is recorded, not raised: a damaged one goes too
        finished = store._finished.pop(sid, None)
        if finished is not None:
            store._after_own_change()
            return finished
        tree = store._index.trees.get(sid)
        if sid in store._damaged:
            count = count_lines(store, data_name)
        elif tree is None or not tree.order:
            raise session_not_found(sid, store.url)
        else:
            count = len(tree.order)
        store._bump_counter(pending=sid, durable=True)
        try:
            with contextlib.suppress(FileNotFoundError):
                # It names the session's ids: dropped, rebuilt by a later write.
                os.unlink(IDS_NAME, dir_fd=store._dir_fd)
            store._replace_sidecar(sid, _deleting_body(count))  # the commit
            store._append_manifest(sid, deleted=True)
            erase_files(store, sid)
        finally:
            store._clear_pending()
        store._forget_session(sid)
        store._after_own_change()
        return count


def finish_delete(store: JsonlStore, sid: str, count: int) -> None:
    """Erase what a delete whose intent is on disk left (under the exclusive lock)."""
    store._bump_counter()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(IDS_NAME, dir_fd=store._dir_fd)
    store._read_manifest()
    if sid in store._manifest:  # the deleter died before it wrote its mark
        store._append_manifest(sid, deleted=True)
    erase_files(store, sid)
    store._forget_session(sid)
    store._deleting.discard(sid)
    store._finished[sid] = count


def count_lines(store: JsonlStore, data_name: str) -> int:
    """Non-blank lines of a damaged session's data file (0 when it is no file)."""
    try:
        data = store._read_file(data_name, 0)
    except StoreError:
        return 0
    return sum(1 for line in data.split(b"\n") if line.strip(b"\0 \t\r"))


def erase_files(store: JsonlStore, sid: str) -> None:
    """Zero the data file (a regular file only: links are not followed), unlink it
    and the index sidecar, and the sidecar last, whatever state each is in.

    Every step can be run again: a delete's intent (the sidecar) stays until the end,
    so whoever finishes an interrupted delete runs the whole of this."""
    data_name, sidecar_name = _file_names(sid)
    with _io(f"erasing session {sid!r} from {store._path}"):
        try:
            info = os.stat(data_name, dir_fd=store._dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is not None:
            if stat.S_ISREG(info.st_mode):
                zero(store, data_name)
            os.unlink(data_name, dir_fd=store._dir_fd)
        index = index_name(sid)
        for name in (f".{sidecar_name}.tmp", index, f"{index}.tmp", sidecar_name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=store._dir_fd)
        if store._fsync:
            _fsync_dir(store._path)


def zero(store: JsonlStore, data_name: str) -> None:
    fd = os.open(data_name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=store._dir_fd)
    try:
        size, chunk = os.fstat(fd).st_size, bytes(_ZERO_CHUNK)
        for offset in range(0, size, len(chunk)):
            os.pwrite(fd, chunk[: size - offset], offset)
        if store._fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def sweep_debris(store: JsonlStore) -> None:
    """Once per process: cut every session's bytes beyond its committed length.

    ``_remove_debris`` catches a writer that dies now; this catches what older
    crashes left (a power cut loses the record in ``.lock``). Under the exclusive
    lock, bytes past a commit belong to no live writer.
    """
    for name in os.listdir(store._dir_fd):
        ours = (SIDECAR_SUFFIX + ".tmp", ".index.tmp")
        if (name.startswith(".") and name.endswith(ours)) or name == IDS_NAME + ".tmp":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=store._dir_fd)
    for sid in builtins.list(store._files):
        store._load_quietly(sid)  # hand edits bump no counter: read the sidecar again
        state = store._files.get(sid)
        data_name, sidecar_name = _file_names(sid)
        if (
            state is None
            or not state.has_sidecar
            or (store._data_size(data_name) or 0) <= state.loaded
        ):
            continue
        store._bump_counter()
        if state.loaded == 0 and sid not in store._index.trees:
            os.unlink(data_name, dir_fd=store._dir_fd)  # data first: see _remove_debris
            os.unlink(sidecar_name, dir_fd=store._dir_fd)
            del store._files[sid]
            continue
        truncate(store, data_name, state.loaded)


def truncate(store: JsonlStore, data_name: str, length: int) -> None:
    fd = os.open(data_name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=store._dir_fd)
    try:
        os.ftruncate(fd, length)
        if store._fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def backfill_sidecars(store: JsonlStore) -> None:
    """Give version 1 sidecars of loaded sessions their summary (once per process).

    Only sidecars that already describe the whole file are rewritten, and without
    fsync: losing one to a power cut leaves the old sidecar or none, and both still
    read correctly.
    """
    for sid, state in store._files.items():
        if state.summarised or not state.has_sidecar or sid not in store._index.trees:
            continue
        data_name, _ = _file_names(sid)
        if store._data_size(data_name) != state.loaded:
            continue
        store._write_sidecar(sid, state.loaded, store._index.leaf(sid), sync=False)
        state.summarised = True


def remove_debris(store: JsonlStore) -> None:
    """Undo what a writer that died mid-write left behind (under the exclusive lock).

    The record in ``.lock`` names the session; its owner is gone, since a live one
    would still hold the lock this writer holds, so nobody is writing its files.
    """
    sid = store._pending_session()
    if sid is None:
        return
    store._bump_counter()
    data_name, sidecar_name = _file_names(sid)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(f".{sidecar_name}.tmp", dir_fd=store._dir_fd)
    try:
        sidecar = store._read_sidecar(sid)
    except StoreError:
        sidecar = None
    if sidecar is not None and sidecar.deleting is not None:
        # A delete_session killed after its commit: finish the erasure.
        finish_delete(store, sid, sidecar.deleting)
        store._clear_pending()
        return
    try:
        size = store._data_size(data_name)
    except StoreError:
        sidecar, size = None, None  # damaged: left for 'check' to report
    if size is not None and sidecar is not None and sidecar.committed < size:
        if sidecar.committed == 0 and sid not in store._index.trees:
            # A session whose first batch never committed: no session at all. The data
            # goes first, so a lockless reader never sees it without its sidecar.
            os.unlink(data_name, dir_fd=store._dir_fd)
            os.unlink(sidecar_name, dir_fd=store._dir_fd)
            store._files.pop(sid, None)
        else:
            truncate(store, data_name, sidecar.committed)
    elif size == 0 and sidecar is None:
        os.unlink(data_name, dir_fd=store._dir_fd)  # created, then killed before a byte
        store._files.pop(sid, None)
    elif size and sidecar is not None and sidecar.committed and store._zeroed(data_name):
        # An older prism-om's delete_session, killed once it had begun zeroing (maybe
        # part way): finish it, zeroing all of it.
        erase_files(store, sid)
        store._forget_session(sid)
    elif size is None and sidecar is not None:
        # An older prism-om's delete_session, killed between its two unlinks.
        os.unlink(sidecar_name, dir_fd=store._dir_fd)
        store._forget_session(sid)
    store._clear_pending()
