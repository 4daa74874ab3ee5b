"""``prism-om check`` and ``check --repair`` of a JSONL store: what each session file
holds, and cutting a damaged one back to its last valid entry (the damaged file kept in
the backup directory first). Run on ``JsonlStore``'s worker thread, under its lock."""

from __future__ import annotations

import builtins
import contextlib
import os
import shutil
import stat
from typing import TYPE_CHECKING

from ..._gc import collector_paused
from ...errors import CorruptStoreError, InvalidInputError, StoreError
from ..segment_index.lazy_entries import LazyEntries
from .deletion import remove_debris, truncate
from .files import SessionCheck, _file_names, _FileState, _fsync_dir
from .index_sidecar import index_name
from .loading import load_line

if TYPE_CHECKING:
    from .store import JsonlStore

__all__ = ["check_sync", "repair_sync"]


def check_sync(store: JsonlStore) -> builtins.list[SessionCheck]:
    with store._locked(exclusive=False):
        store._refresh()
        store._load_all()
        for sid in builtins.list(store._files):
            parse_all(store, sid)
        return [check_session(store, sid) for sid in checked_ids(store)]


def parse_all(store: JsonlStore, sid: str) -> None:
    """Parse every message line a load placed unparsed; damage is recorded."""
    tree = store._index.trees.get(sid)
    entries = store._index.entries
    if tree is None or not isinstance(entries, LazyEntries):
        return
    located = [i for i in tree.order if entries.is_located(i)]
    try:
        with collector_paused():
            for at in range(0, len(located), 4096):
                entries.many(located[at : at + 4096], cache=False)  # parsed, dropped
    except CorruptStoreError as exc:
        store._index.drop_session(sid)
        store._files.pop(sid, None)
        store._damaged[sid] = (store._signature(sid), exc)


def checked_ids(store: JsonlStore) -> builtins.list[str]:
    # A session a delete has committed to erasing is no session, damaged or not.
    on_disk = [sid for sid in store._on_disk() if sid not in store._deleting]
    return on_disk + sorted(sid for sid in store._damaged if sid not in on_disk)


def check_session(store: JsonlStore, sid: str) -> SessionCheck:
    data_name, _ = _file_names(sid)
    damaged = store._damaged.get(sid)
    if damaged is not None:
        entries = 0
        with contextlib.suppress(StoreError):
            entries = salvage(store, sid)[1]
            store._index.drop_session(sid)
        return SessionCheck(sid, entries, str(damaged[1]))
    state = store._files.get(sid)
    size = store._data_size(data_name) or 0
    loaded = state.loaded if state is not None else 0
    return SessionCheck(sid, store._summary(sid).entries, None, max(size - loaded, 0))


def repair_missing_data(store: JsonlStore, sid: str, backup: str, problem: str) -> SessionCheck:
    """A sidecar whose data file is gone: keep the sidecar in the backup, drop it here."""
    _, sidecar_name = _file_names(sid)
    try:
        old = store._read_sidecar(sid)
    except StoreError:
        old = None
    os.rename(sidecar_name, os.path.join(backup, sidecar_name), src_dir_fd=store._dir_fd)
    del store._damaged[sid]
    lost = old.summary.entries if old is not None and old.summary is not None else None
    lost_bytes = old.committed if old is not None else 0
    return SessionCheck(sid, 0, problem, lost_entries=lost, lost_bytes=lost_bytes)


def salvage(store: JsonlStore, sid: str) -> tuple[_FileState, int]:
    """Load the session's entries up to its first damage into the index.

    Returns the file state (``loaded`` is where the valid entries end) and how many
    entries that is; the caller drops the session again unless it cuts the file.
    """
    data_name, _ = _file_names(sid)
    store._index.drop_session(sid)
    size = store._data_size(data_name) or 0
    data = store._read_file(data_name, 0, size)
    state = _FileState()
    pos = 0
    with collector_paused():
        while (newline := data.find(b"\n", pos)) >= 0:
            try:
                load_line(store, sid, state, data[pos:newline])
            except CorruptStoreError:
                break
            pos = state.loaded = newline + 1
    return state, store._summary(sid).entries


def repair_sync(store: JsonlStore, backup_dir: str) -> builtins.list[SessionCheck]:
    backup = os.path.abspath(backup_dir)
    if os.path.realpath(backup) == os.path.realpath(store._path):
        raise StoreError(
            f"the backup directory {backup!r} must not be the store itself", url=store.url
        )
    with store._locked(exclusive=True):
        remove_debris(store)
        store._refresh()
        store._load_all()
        for sid in builtins.list(store._files):
            parse_all(store, sid)
        refuse_backup_overwrite(store, backup)
        results = []
        for sid in checked_ids(store):
            damage = store._damaged.get(sid)
            if damage is None or not isinstance(damage[1], CorruptStoreError):
                # Healthy, or not damage a cut can fix (a sidecar of a newer version,
                # a file this user may not read): reported, never rewritten.
                results.append(check_session(store, sid))
                continue
            results.append(repair_session(store, sid, backup))
        store._seen = store._change_key()
        return results


def refuse_backup_overwrite(store: JsonlStore, backup: str) -> None:
    """Refuse a backup that would replace anything, before any session is touched.

    A backup is the only copy of what a repair cuts away: an earlier backup (or any
    file) in its place must survive, so a clash is bad input, not a reason to copy over.
    """
    if os.path.lexists(backup) and not os.path.isdir(backup):
        raise InvalidInputError(
            f"the backup {backup!r} exists and is not a directory; name a new one",
            url=store.url,
        )
    for sid in checked_ids(store):
        damage = store._damaged.get(sid)
        if damage is None or not isinstance(damage[1], CorruptStoreError):
            continue
        for name in _file_names(sid):
            if os.path.lexists(os.path.join(backup, name)):
                raise InvalidInputError(
                    f"the backup directory {backup!r} already holds {name!r}, which "
                    "repairing this store would overwrite; name a new backup directory",
                    session_id=sid,
                    url=store.url,
                )


def repair_session(store: JsonlStore, sid: str, backup: str) -> SessionCheck:
    data_name, sidecar_name = _file_names(sid)
    problem = str(store._damaged[sid][1])
    os.makedirs(backup, exist_ok=True)
    store._bump_counter()
    try:
        info = os.stat(data_name, dir_fd=store._dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return repair_missing_data(store, sid, backup, problem)
    if not stat.S_ISREG(info.st_mode):
        # Not ours to cut: move the link or directory out of the store, intact.
        for name in (data_name, sidecar_name):
            with contextlib.suppress(FileNotFoundError):
                os.rename(name, os.path.join(backup, name), src_dir_fd=store._dir_fd)
        del store._damaged[sid]
        return SessionCheck(sid, 0, problem, moved_aside=True, lost_entries=None)
    for name in (data_name, sidecar_name):
        if os.path.lexists(store._where(name)):
            shutil.copy2(store._where(name), os.path.join(backup, name), follow_symlinks=False)
    if store._fsync:
        _fsync_dir(backup)
    try:
        old = store._read_sidecar(sid)
    except StoreError:
        old = None
    state, kept = salvage(store, sid)
    tail = store._read_file(data_name, state.loaded)
    lost_lines = sum(1 for line in tail.split(b"\n") if line.strip(b"\0 \t\r"))
    recorded = old.summary.entries if old is not None and old.summary is not None else None
    lost_entries: int | None = lost_lines
    if old is not None and old.committed > info.st_size:
        # Whole lines vanished with the missing bytes: only the sidecar can count them.
        lost_entries = recorded - kept if recorded is not None else None
    truncate(store, data_name, state.loaded)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(index_name(sid), dir_fd=store._dir_fd)  # described the uncut file
    if kept:
        tree = store._index.trees[sid]
        if old is not None and old.leaf in tree.order:
            tree.leaf = old.leaf
        store._write_sidecar(sid, state.loaded, tree.leaf)
        state.has_sidecar = state.summarised = True
        store._files[sid] = state
    else:
        os.unlink(data_name, dir_fd=store._dir_fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sidecar_name, dir_fd=store._dir_fd)
        store._files.pop(sid, None)
    del store._damaged[sid]
    # Bytes the sidecar committed that are gone count as lost too, not only those cut.
    lost_bytes = max(info.st_size, old.committed if old is not None else 0) - state.loaded
    return SessionCheck(sid, kept, problem, lost_entries=lost_entries, lost_bytes=lost_bytes)
