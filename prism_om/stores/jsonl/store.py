"""The JSONL adapter: one append-only, human-readable log file per session.

File layout, all inside one directory::

    <session_id>.jsonl       the session's entries, one JSON object per line
                             (``entry.model_dump_json(by_alias=True)``), in append order
    <session_id>.leaf.json   sidecar: ``{"leaf": <entry id>, "committedBytes": <n>,
                             "version": 2, "entries", "messages", "leaves",
                             "lastActivity"}``: the persisted current leaf, the length of
                             the data file that whole batches have been written to, and
                             the session's summary at that length
    .<session_id>.leaf.json.tmp   the next sidecar, written in full, then renamed over it
    .sessions                session ids in order of creation, one per line; a
                             line ``-<id>`` records a ``delete_session`` of that id
    .<session_id>.index      cache: the ids, parents, kinds and message token counts of
                             the file's first lines and a digest of their bytes (see
                             ``index_sidecar``)
    .ids                     cache: each session file's ids (see ``id_index``)
    .lock                    the ``flock`` target; holds a change counter, and the session
                             a writer is changing while it does (see "Debris")

Session files hold entries only, so each stays a readable session log. Session ids are
validated names (no separators, no dot-only names) and every file is opened relative to
the directory's descriptor with ``O_NOFOLLOW``, so no id and no symbolic link can make
the store touch a file outside the directory.

Sidecar versions. Version 1 sidecars (no ``version`` key) hold only the leaf and the
committed length; they stay valid. A session whose sidecar lacks the summary has it
computed from the entries when read (nothing is rewritten by a reader) and written by
the first write of a process that loads it (backfill). A sidecar of a newer version than
this code knows makes that session refuse to load, naming both versions.

Durability. A batch is written with one ``os.write`` of all its lines, then (with
``fsync=True``, the default) fsynced; only then is the sidecar replaced atomically
(write a temporary file, fsync it, rename it over the sidecar, fsync the directory), and
that rename is the commit. With ``fsync=True`` a returned append survives power loss.
With ``fsync=False`` nothing is fsynced: a returned append survives the process being
killed (the kernel still holds the bytes) but not power loss or a kernel crash, after
which the newest batches may be missing and the session may need ``prism-om check
--repair``. Before the first batch of a session (or of a file that has no sidecar) a
sidecar for the current length is written first, so every batch has a committed length
to fall back to.

Recovery rules, applied when a file is read (bytes are parsed as bytes, never decoded
as a whole):

* Bytes beyond the sidecar's committed length belong to a batch whose append never
  returned (a torn tail): readers ignore them and the next writer truncates them away,
  so a batch is all or nothing. (Lines appended by hand to a file that has a sidecar are
  therefore dropped; append through the store instead.)
* A file shorter than the sidecar's committed length lost committed entries: reading the
  session raises ``CorruptStoreError`` naming it and both byte counts, and no write
  touches it until ``prism-om check --repair`` cuts it back to its last valid entry.
* A file without a usable sidecar (missing, unparsable, or not at a line end: a
  hand-made file) counts every complete line as committed, and its leaf is its last
  entry. An unterminated last line that is not valid JSON, a cut inside a multi-byte
  character, and trailing NUL padding are an interrupted append: ignored, and truncated
  by the next writer. An unterminated last line that is a complete entry is kept (the
  next writer ends it).
* A malformed line followed by further lines, or any malformed line inside the
  committed length, is corruption: ``CorruptStoreError`` names the file and the line.
  Every line must also keep the store rules as it is loaded (known parent in the same
  session, one root, unique ids, the file's own session id), else ``CorruptStoreError``
  with its line number.

Damage is per session: a damaged file, a symbolic link or a foreign file in the
directory fails the operations that name its session (and is reported by ``check``);
every other session stays readable and writable. Entry ids are unique across the store,
so a write must know every session's ids: from the sessions it has loaded, from ``.ids``
for each file whose inode, size and mtime still match its record, and by loading any
other session (``get`` of an id no loaded session holds loads every readable session);
ids inside a damaged session cannot be checked until it is repaired.

The caches. ``.<session_id>.index`` lets a load place the message lines of the prefix
it describes without parsing them (they are parsed when read: ``LazyEntries``) and
gives ``branch_tokens`` their token counts (each append counts its messages, before the
lock), and ``.ids`` lets a write skip loading sessions. Both are written by writers only (the
index once a file has ``INDEX_MIN_LINES`` lines it does not cover, and again as it
grows by an eighth; ``.ids`` after a write had to load that many lines for want of a
record), without fsync, by temporary file and rename; both are trusted only while they
match the files (see their modules), so a stale, truncated, damaged or foreign cache is
ignored and rebuilt. They hold no message text, ``check`` still parses every line, and
deleting them loses nothing.

Lazy loading. Opening reads nothing but the directory; a read loads only the session it
names (through its index sidecar when one matches), and ``sessions``/``session_summaries``
read sidecars (loading only sessions whose sidecar has no summary). A process loads each
session once and then only its new committed bytes. What it keeps of a message is where
its line lies (``LazyEntries``): a read of messages reads their lines back with
``os.pread`` and parses them, and a bounded cache keeps the most recently read, written
or loaded ones (``BODY_CACHE_ENTRIES`` entries, ``BODY_CACHE_BYTES`` of lines), so the
process's memory grows with a session's entry count, not its text. Memory records and
compactions stay parsed (every ledger reads them).

Concurrency. Writers take an exclusive ``flock`` on ``.lock`` and hold it across
refresh, check, data write and sidecar replace; readers of a writable store take a
shared lock; a store opened ``read_only`` does not even open ``.lock``, writes nothing,
and rechecks the files of the sessions it has loaded on every read (data is only ever
changed beyond its committed length and sidecars are replaced by rename, so a lockless
reader sees whole batches). Every writer bumps the counter in ``.lock`` before it
changes a file, so a process notices other processes' appends and leaf moves before
each read or write by comparing the counter (and the directory's mtime, which catches a
session file dropped in by hand), then loads only the new committed bytes of each loaded
session. Locks are polled, so a lock held past ``lock_timeout`` raises
``StoreBusyError``. File I/O runs in a worker thread; coroutines of one store are
serialised by an ``asyncio.Lock``.

Debris. A writer records the session it is about to change in ``.lock`` and clears the
record when done. A writer that finds a record on taking the exclusive lock knows its
owner died mid-write (a live owner would still hold the lock), so it cuts that session
back to its committed length (a session that never committed an entry loses its files)
and removes the temporary sidecar. Readers never delete.

Deleting. ``delete_session`` commits first: under the exclusive lock, with the session
recorded (and fsynced) in ``.lock``, it replaces the sidecar, as every commit does, by a
delete's intent: a sidecar of an empty session (what a reader that predates this key sees
too) with ``"deleting": <entry count>``. From that rename on, every reader finds no
session, whatever state the data file is in, and drops what it had loaded. Only then does
the delete append ``-<id>`` to ``.sessions``, zero the data file (the text must not stay
in its blocks), unlink it and the index sidecar, and unlink the intent last. A deleter
killed before the rename leaves the session whole; after it, the session is gone, and
whoever next takes the exclusive lock and meets the intent (the debris rule, a write or
check of that session, ``repair``, a retried ``delete_session``, which then returns the
intent's count) runs every step of the erasure again. A lockless reader that read a
sidecar from before the commit and data from after it notices (the sidecar it reads again
after the data no longer commits those bytes) and reads the session again: gone.

Limits: a local POSIX filesystem (``flock`` is not reliable over NFS); never delete
``.lock`` while stores are open; on a case-insensitive filesystem two session ids that
differ only in case cannot both be stored (the second is refused). Hand edits to an
open store are seen after the next write by any process, or on reopen.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import errno
import fcntl
import functools
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import ParamSpec, TypeVar

from ...entries import SessionEntry, validate_session_id
from ...errors import (
    CorruptStoreError,
    InvalidSessionIdError,
    ReadOnlyStoreError,
    StoreBusyError,
    StoreClosedError,
    StoreError,
    StoreNotFoundError,
)
from ...tokens import get_estimator
from .._shield import finish_then_cancel
from ..arguments import check_entry_id, check_expected_memory_head, check_id_list, check_leaf_id
from ..base import (
    ANY_MEMORY_HEAD,
    AnyMemoryHead,
    SessionSummary,
    chain_at_leaf,
    check_batch_shape,
    check_memory_head,
)
from ..segment_index.index import TreeIndex
from ..segment_index.lazy_entries import LazyEntries
from ..segment_index.reads import TreeIndexReads
from .deletion import backfill_sidecars, delete_sync, finish_delete, remove_debris, sweep_debris
from .files import (
    _APPEND_FLAGS,
    _LOCK_POLL_FIRST,
    _LOCK_POLL_MAX,
    _MOVED_RETRIES,
    _PENDING_AT,
    _READ_FLAGS,
    DATA_SUFFIX,
    DELETED_MARK,
    LOCK_NAME,
    MANIFEST_NAME,
    SIDECAR_VERSION,
    SessionCheck,
    _file_names,
    _FilesMoved,
    _FileState,
    _ids_due,
    _index_due,
    _io,
    _parse_sidecar,
    _read_all,
    _session_of,
    _Sidecar,
    _sidecar_body,
    _with_batch,
    _write_all,
)
from .id_index import IDS_NAME, FileKey, ForeignIds, ids_body, read_ids
from .index_sidecar import (
    index_body,
    index_name,
    kind_of,
)
from .loading import lazy, load_chunk, read_lines
from .repair import check_sync, repair_sync

__all__ = ["JsonlStore", "SessionCheck"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class JsonlStore(TreeIndexReads):
    """A directory of JSONL session logs; see the module docstring for the format.

    Open with ``await JsonlStore.open(directory)``. ``fsync=True`` (the default) makes
    every returned append durable across power loss; ``fsync=False`` skips every fsync,
    so appends survive a crash of the application but not of the machine.
    ``read_only=True`` creates nothing, takes no lock and refuses writes with
    ``ReadOnlyStoreError``; ``create=False`` (implied by ``read_only``) raises
    ``StoreNotFoundError`` for a missing directory.
    """

    def __init__(
        self,
        path: str,
        dir_fd: int,
        lock_fd: int | None,
        *,
        fsync: bool,
        lock_timeout: float,
        read_only: bool = False,
    ):
        super().__init__()
        self.url = f"jsonl:{path}"
        self._path = path
        self._dir_fd = dir_fd
        self._lock_fd = lock_fd
        self._fsync = fsync
        self._lock_timeout = lock_timeout
        self._read_only = read_only
        self._index = TreeIndex(self.url)
        self._index.entries = LazyEntries(functools.partial(read_lines, self))
        # Loaded sessions only: a session enters on first use (see "Lazy loading").
        self._files: dict[str, _FileState] = {}
        # Sessions that failed to load: (what their files looked like, the error). The
        # error repeats until the files change.
        self._damaged: dict[str, tuple[object, StoreError]] = {}
        # Every readable session of the directory is loaded (writes and id lookups).
        self._all_loaded = False
        # This process's first write swept the directory for old debris.
        self._swept = False
        # Session ids of ``.sessions`` by their last line (a re-created session moves last).
        self._manifest: dict[str, None] = {}
        self._manifest_offset = 0
        # (change counter, directory mtime) as of the last refresh; None forces a scan.
        self._seen: tuple[int, int] | None = None
        # Ids of the sessions not loaded, from ``.ids`` (see ``id_index``), checked
        # against their files as of the change key ``_ids_seen``.
        self._foreign = ForeignIds()
        self._ids_seen: object = None
        # The exclusive lock is held (by this thread): a delete's intent found now is
        # finished rather than only read as no session.
        self._exclusive = False
        # Sessions whose sidecar is a delete's intent, as last seen: they are no sessions.
        self._deleting: set[str] = set()
        # Deletes this process finished for a dead deleter, by session: the entry count.
        self._finished: dict[str, int] = {}
        # Coroutines queue here rather than in the thread pool...
        self._lock = asyncio.Lock()
        # ...and worker threads here: a cancelled await leaves its thread running, and the
        # next operation must not touch the index until that thread is done.
        self._thread_lock = threading.Lock()

    # -- opening and closing -----------------------------------------------------------

    @classmethod
    async def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        fsync: bool = True,
        lock_timeout: float = 30.0,
        read_only: bool = False,
        create: bool = True,
    ) -> JsonlStore:
        """Open the store in ``directory`` (created if missing, unless told not to).

        Nothing is read until a session is used; see the module docstring.
        """
        return await asyncio.to_thread(
            cls._open_sync, os.fspath(directory), fsync, lock_timeout, read_only, create
        )

    @classmethod
    def _open_sync(
        cls, directory: str, fsync: bool, lock_timeout: float, read_only: bool, create: bool
    ) -> JsonlStore:
        path = os.path.abspath(directory)
        if (read_only or not create) and not os.path.isdir(path):
            what = "is not a directory" if os.path.exists(path) else "does not exist"
            raise StoreNotFoundError(
                f"no JSONL store at {path!r}: the directory {what}", url=f"jsonl:{path}"
            )
        with _io(f"opening JSONL store {path!r}"):
            if not read_only:
                os.makedirs(path, exist_ok=True)
            dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                lock_fd = cls._open_lock(dir_fd, read_only)
            except BaseException:
                os.close(dir_fd)
                raise
        store = cls(
            path, dir_fd, lock_fd, fsync=fsync, lock_timeout=lock_timeout, read_only=read_only
        )
        try:
            with store._locked(exclusive=False):
                store._refresh()
        except BaseException:
            store._close_sync()
            raise
        return store

    @staticmethod
    def _open_lock(dir_fd: int, read_only: bool) -> int | None:
        if read_only:
            # Not even for its change counter: without the lock, a counter read just
            # before a writer's commit would hide that commit until the next change, so a
            # lockless reader rechecks its loaded sessions' files on every read instead.
            return None
        return os.open(
            LOCK_NAME,
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=dir_fd,
        )

    async def close(self) -> None:
        """Release the directory and lock descriptors; idempotent."""
        if self._closed:
            return
        async with self._lock:
            await asyncio.to_thread(self._close_sync)

    def _close_sync(self) -> None:
        with self._thread_lock:
            if self._closed:
                return
            self._closed = True
            if self._lock_fd is not None:
                os.close(self._lock_fd)
            os.close(self._dir_fd)

    # -- the SessionStore protocol -------------------------------------------------------

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        batch = check_batch_shape(entries, url=self.url)
        self._ensure_writable()
        if batch:
            await finish_then_cancel(self._run(self._append_sync, batch))

    async def append_at_leaf(
        self,
        entries: Sequence[SessionEntry],
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> builtins.list[SessionEntry]:
        batch = check_batch_shape(entries, url=self.url)
        expected_memory_head = check_expected_memory_head(expected_memory_head)
        self._ensure_writable()
        if not batch:
            return []
        return await finish_then_cancel(
            self._run(self._append_sync, batch, True, expected_memory_head)
        )

    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None:
        check_leaf_id(leaf_id)
        sid = self._session_arg(session_id)
        return await self._read(sid, lambda index: index.memory_head(sid, leaf_id))

    async def get(self, entry_id: str) -> SessionEntry | None:
        check_entry_id(entry_id)
        return (await self.get_many([entry_id])).get(entry_id)

    async def get_many(self, entry_ids: Iterable[str]) -> dict[str, SessionEntry]:
        wanted = builtins.list(dict.fromkeys(check_id_list(entry_ids, "entry_ids")))
        return await self._run(self._get_many_sync, wanted)

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        sid = self._session_arg(session_id)
        return await self._read(sid, lambda index: index.session_entries(sid))

    async def entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        check_leaf_id(leaf_id)
        sid = self._session_arg(session_id)
        return await self._read(sid, lambda index: index.branch(sid, leaf_id))

    async def leaves(self, session_id: str) -> builtins.list[str]:
        sid = self._session_arg(session_id)
        return await self._read(sid, lambda index: index.leaves(sid))

    async def leaf(self, session_id: str) -> str | None:
        sid = self._session_arg(session_id)
        return await self._run(self._leaf_sync, sid)

    async def checkout(self, session_id: str, entry_id: str) -> None:
        check_entry_id(entry_id)
        sid = self._session_arg(session_id)
        self._ensure_writable()
        await finish_then_cancel(self._run(self._set_leaf_sync, sid, entry_id))

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool:
        check_entry_id(entry_id)
        check_leaf_id(leaf_id)
        sid = self._session_arg(session_id)
        return await self._read(sid, lambda index: index.is_on_branch(sid, entry_id, leaf_id))

    async def sessions(self) -> builtins.list[str]:
        return await self._run(self._sessions_sync)

    async def delete_session(self, session_id: str) -> int:
        """Remove the session's data file and sidecars, their bytes overwritten first.

        Atomic for every reader: the delete commits an intent first, and from then on
        the session reads as gone in every process (see "Deleting" in the module
        docstring). The data file is zeroed (and fsynced with ``fsync=True``) before it
        is unlinked, so the text does not linger in the freed blocks of a plain
        filesystem; copies a copy-on-write or journaling filesystem or an SSD keeps are
        out of reach. The id stays in ``.sessions``, which lists names only (other
        processes read it by offset, so it is never rewritten); the ``-<id>`` line
        appended to it tells every other open process to drop what it loaded of the
        session, so none serves the erased text, or mistakes a file re-created under the
        id for a damaged one. A delete killed after its commit is finished by the next
        process to take the write lock; called again for the same session, this finishes
        it and returns the count the interrupted delete recorded. A damaged session is
        erased too (its files whatever their state: a regular file is zeroed first, a
        link is only unlinked), without a repair first; its count is then the file's
        non-blank lines.
        """
        sid = self._session_arg(session_id)
        self._ensure_writable()
        return await finish_then_cancel(self._run(delete_sync, self, sid))

    async def session_summaries(self) -> builtins.list[SessionSummary]:
        """Each readable session's counts, from sidecars; damaged ones are left out.

        Sessions left out for damage are in ``damaged_sessions()`` afterwards.
        """
        return await self._run(self._summaries_sync)

    async def damaged_sessions(self) -> dict[str, StoreError]:
        """Sessions found damaged so far, by id, with the error their reads raise."""
        self._ensure_open()
        async with self._lock:
            return {sid: error for sid, (_, error) in self._damaged.items()}

    async def check(self) -> builtins.list[SessionCheck]:
        """Read every session file in full and report each one's state.

        Nothing is written, whatever is found; a damaged session does not stop the others.
        A session whose delete committed is gone, so not reported, until its erasure is
        finished.
        """
        return await self._run(check_sync, self)

    async def repair(self, backup_dir: str | os.PathLike[str]) -> builtins.list[SessionCheck]:
        """Cut each damaged session back to its last valid entry, after copying it.

        The damaged files are copied into ``backup_dir`` (created; it must not be inside
        the store) before anything changes; a session file that is not a regular file
        (a symbolic link, a directory) is moved there instead. Healthy sessions are not
        touched. Returns what was found and done, per session. A ``backup_dir`` that is
        a file, or that already holds a file of a session to repair, is refused with
        ``InvalidInputError`` before anything is written: a backup never replaces another.
        """
        self._ensure_writable()
        return await self._run(repair_sync, self, os.fspath(backup_dir))

    # -- plumbing between the event loop and the worker thread ---------------------------

    def _ensure_open(self) -> None:
        self._check_open()

    def _ensure_writable(self) -> None:
        self._ensure_open()
        if self._read_only:
            raise ReadOnlyStoreError(f"store {self.url!r} was opened read-only", url=self.url)

    def _session_arg(self, session_id: str) -> str:
        # Same order as the memory store: a closed store first, then a bad id.
        self._ensure_open()
        return validate_session_id(session_id)

    async def _run(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        self._ensure_open()
        async with self._lock:
            return await asyncio.to_thread(fn, *args, **kwargs)

    async def _read(self, sid: str, query: Callable[[TreeIndex], _T]) -> _T:
        return await self._run(self._read_sync, sid, query)

    async def _tree_query(self, session_id: str, query: Callable[[TreeIndex, str], _T]) -> _T:
        sid = self._session_arg(session_id)
        return await self._read(sid, lambda index: query(index, sid))

    def _read_sync(self, sid: str, query: Callable[[TreeIndex], _T]) -> _T:
        with self._locked(exclusive=False):
            self._refresh()
            self._ensure_session(sid)
            try:
                return query(self._index)
            except CorruptStoreError:
                if self._lock_fd is not None:
                    raise
                # A lockless reader reads message lines after its refresh: another
                # process's delete may have zeroed them since. Look at the files again
                # (the delete committed before it zeroed); damage raises again.
                self._forget_session(sid)
                self._read_manifest()
                self._ensure_session(sid)
                return query(self._index)

    def _leaf_sync(self, sid: str) -> str | None:
        """The leaf, from the sidecar alone while the session is not loaded.

        Only a sidecar this code wrote (it has the summary), whose committed length is
        present and ends a line, is taken at its word: that is exactly when loading the
        session would trust it too. Anything else loads the session.
        """
        with self._locked(exclusive=False):
            self._refresh()
            if sid not in self._files and sid not in self._damaged:
                leaf = self._sidecar_leaf(sid)
                if leaf is not None:
                    return leaf
            self._ensure_session(sid)
            return self._index.leaf(sid)

    def _sidecar_leaf(self, sid: str) -> str | None:
        try:
            sidecar = self._read_sidecar(sid)
            data_name, _ = _file_names(sid)
            size = self._data_size(data_name)
        except StoreError:
            return None
        if sidecar is None or sidecar.summary is None or sidecar.leaf is None:
            return None
        if size is None or not 0 < sidecar.committed <= size:
            return None
        if self._read_file(data_name, sidecar.committed - 1, 1) != b"\n":
            return None
        return sidecar.leaf

    def _get_many_sync(self, wanted: builtins.list[str]) -> dict[str, SessionEntry]:
        with self._locked(exclusive=False):
            self._refresh()
            if not self._all_loaded and any(i not in self._index.entries for i in wanted):
                self._load_all()
            entries = self._index.entries
            return {i: entries[i] for i in wanted if i in entries}

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        """Hold the thread lock and the directory's flock; map stray OS errors."""
        with self._thread_lock:
            self._ensure_open()
            lock_fd = None if self._read_only else self._lock_fd
            if lock_fd is not None:
                self._flock(lock_fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            self._exclusive = exclusive and lock_fd is not None
            try:
                with _io(f"JSONL store {self._path!r}"):
                    yield
            finally:
                self._exclusive = False
                if lock_fd is not None:
                    fcntl.flock(lock_fd, fcntl.LOCK_UN)

    def _flock(self, lock_fd: int, operation: int) -> None:
        # Polled rather than blocking, so a stuck writer elsewhere ends in StoreBusyError
        # instead of a worker thread that waits forever.
        deadline = time.monotonic() + self._lock_timeout
        delay = _LOCK_POLL_FIRST
        while True:
            try:
                fcntl.flock(lock_fd, operation | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            except OSError as exc:
                raise StoreError(
                    f"locking {self._where(LOCK_NAME)}: {exc.strerror}", url=self.url
                ) from exc
            if time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"JSONL store {self._path!r} stayed locked by another process for "
                    f"{self._lock_timeout:g} s",
                    url=self.url,
                )
            time.sleep(delay)
            delay = min(delay * 2, _LOCK_POLL_MAX)

    def _where(self, name: str) -> str:
        return os.path.join(self._path, name)

    # -- noticing other processes' writes ------------------------------------------------

    def _lock_head(self) -> bytes:
        if self._lock_fd is None:
            return b""
        return os.pread(self._lock_fd, 256, 0)

    def _read_counter(self) -> int | None:
        try:
            return int(self._lock_head()[:_PENDING_AT].split(b"\n", 1)[0])
        except ValueError:  # empty (nobody wrote yet) or damaged: always rescan
            return None

    def _change_key(self) -> tuple[int, int] | None:
        counter = self._read_counter()
        if counter is None:
            return None
        return counter, os.fstat(self._dir_fd).st_mtime_ns

    def _bump_counter(self, pending: str | None = None, *, durable: bool = False) -> None:
        """Announce a change; called under the exclusive lock before any file changes.

        Bumping first means a crash between the bump and the write costs readers one
        needless rescan, while bumping last could hide a committed batch from them.
        ``pending`` names the session about to change, for the debris rule; ``durable``
        (a delete) fsyncs the record, so a power cut cannot lose the only pointer to a
        delete's intent.
        """
        assert self._lock_fd is not None  # writable stores always hold one
        current = self._read_counter()
        value = current + 1 if current is not None else time.time_ns()
        with _io(f"writing {self._where(LOCK_NAME)}"):
            os.pwrite(self._lock_fd, b"%020d\n" % value, 0)
            if pending is not None:
                os.pwrite(self._lock_fd, b"pending " + pending.encode() + b"\n", _PENDING_AT)
                if durable and self._fsync:
                    os.fsync(self._lock_fd)

    def _clear_pending(self) -> None:
        assert self._lock_fd is not None
        with contextlib.suppress(OSError):  # a record left behind only costs a needless check
            os.ftruncate(self._lock_fd, _PENDING_AT)

    def _pending_session(self) -> str | None:
        record = self._lock_head()[_PENDING_AT:]
        if not record.startswith(b"pending "):
            return None
        try:
            return validate_session_id(record[8:].split(b"\n", 1)[0].decode("ascii"))
        except (UnicodeDecodeError, InvalidSessionIdError):
            return None

    def _refresh(self) -> None:
        """Bring the loaded sessions up to date with every committed byte on disk."""
        key = self._change_key()
        if key is not None and key == self._seen:
            return
        self._read_manifest()
        for sid in builtins.list(self._files):
            self._load_quietly(sid)
        if self._all_loaded:
            for sid in self._on_disk():
                if sid not in self._files:
                    self._load_quietly(sid)
        self._seen = key

    def _on_disk(self) -> builtins.list[str]:
        """Session ids with a data file here: by creation (``.sessions``), then by name."""
        found = {sid for name in os.listdir(self._dir_fd) if (sid := _session_of(name))}
        rank = {sid: i for i, sid in enumerate(self._manifest)}
        return sorted(found, key=lambda sid: (rank.get(sid, len(rank)), sid))

    def _load_all(self) -> None:
        self._read_manifest()
        for sid in self._on_disk():
            if sid not in self._files:
                self._load_quietly(sid)
        self._all_loaded = True

    def _load_quietly(self, sid: str) -> None:
        """Load or refresh a session; damage is recorded for it rather than raised."""
        with contextlib.suppress(StoreError):
            self._ensure_session(sid, refresh=True)

    def _ensure_session(self, sid: str, *, refresh: bool = False) -> None:
        """Load the session (or with ``refresh``, bring it up to date); raise if damaged.

        A loaded session is current after ``_refresh``, so a read costs no file access.
        """
        damaged = self._damaged.get(sid)
        if damaged is not None:
            if self._signature(sid) == damaged[0]:
                raise damaged[1]
            del self._damaged[sid]  # the files changed (a repair?): try again
        elif sid in self._files and not refresh:
            return
        self._foreign.drop(sid)  # loaded from now on, so kept current by _refresh
        try:
            self._refresh_steady(sid)
        except (StoreBusyError, StoreClosedError):
            raise
        except StoreError as exc:
            self._index.drop_session(sid)
            self._files.pop(sid, None)
            self._damaged[sid] = (self._signature(sid), exc)
            raise

    def _refresh_steady(self, sid: str) -> None:
        """``_refresh_session``, looked at again while the files change under a reader.

        A lockless (``read_only``) reader may read a session's files while another
        process deletes or re-creates it: a sidecar from before, data from after. What it
        saw is damage only if the files look the same after a second full read; else it
        drops what it loaded and reads them afresh. A reader holding the lock cannot see
        that (writers hold it exclusively), so it reads once.
        """
        if self._lock_fd is not None:
            self._refresh_session(sid)
            return
        seen: object = None
        for _ in range(_MOVED_RETRIES):
            try:
                self._refresh_session(sid)
                return
            except _FilesMoved:
                seen = None
            except CorruptStoreError:
                now = self._signature(sid)
                if now == seen:
                    raise
                seen = now
            self._forget_session(sid)
            self._read_manifest()
        raise StoreBusyError(
            f"session {sid!r}: its files in {self._path!r} kept changing while read "
            f"({_MOVED_RETRIES} times); retry",
            session_id=sid,
            url=self.url,
        )

    def _signature(self, sid: str) -> object:
        """What the session's files look like, to tell whether damage could have changed."""
        data_name, sidecar_name = _file_names(sid)
        try:
            info = os.stat(data_name, dir_fd=self._dir_fd, follow_symlinks=False)
            data: object = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode)
        except OSError as exc:
            data = exc.errno
        try:
            side: object = self._read_file(sidecar_name, 0)
        except StoreError as exc:
            side = str(exc)
        return data, side

    def _read_manifest(self) -> None:
        data = self._read_file(MANIFEST_NAME, self._manifest_offset)
        end = data.rfind(b"\n") + 1  # a crash may leave half a line: wait for its end
        for raw in data[:end].splitlines():
            text = raw.decode("ascii", "replace").strip()
            deleted = text.startswith(DELETED_MARK)
            try:
                sid = validate_session_id(text[len(DELETED_MARK) :] if deleted else text)
            except InvalidSessionIdError:
                continue
            self._manifest.pop(sid, None)
            if deleted:
                self._forget_session(sid)
            else:
                self._manifest[sid] = None
        self._manifest_offset += end

    def _forget_session(self, sid: str) -> None:
        """Drop all this process holds of a session another process deleted."""
        self._foreign.drop(sid)
        if sid in self._files or sid in self._damaged or sid in self._index.trees:
            self._index.drop_session(sid)
            self._files.pop(sid, None)
            self._damaged.pop(sid, None)
            self._forget_cached()

    def _read_file(self, name: str, offset: int, length: int | None = None) -> bytes:
        """Bytes of a directory file from ``offset`` (to its end); b"" when it is absent."""
        with _io(f"reading {self._where(name)}"):
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=self._dir_fd)
            except FileNotFoundError:
                return b""
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise CorruptStoreError(
                        f"{self._where(name)} is a symbolic link (links are not followed)",
                        url=self.url,
                    ) from exc
                raise
            try:
                if length is None:
                    length = max(os.fstat(fd).st_size - offset, 0)
                return _read_all(fd, offset, length)
            finally:
                os.close(fd)

    def _data_size(self, name: str) -> int | None:
        """The data file's size, or None when there is none."""
        with _io(f"reading {self._where(name)}"):
            try:
                info = os.stat(name, dir_fd=self._dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return None
        if not stat.S_ISREG(info.st_mode):
            raise CorruptStoreError(
                f"{self._where(name)} is not a regular file (symbolic links are not followed)",
                url=self.url,
            )
        return info.st_size

    def _read_sidecar(self, sid: str) -> _Sidecar | None:
        _, sidecar_name = _file_names(sid)
        sidecar = _parse_sidecar(self._read_file(sidecar_name, 0), sid)
        if sidecar is not None and sidecar.version > SIDECAR_VERSION:
            raise StoreError(
                f"session {sid!r}: {self._where(sidecar_name)} has version {sidecar.version}, "
                f"written by a newer prism-om; this one reads up to version {SIDECAR_VERSION}",
                url=self.url,
            )
        return sidecar

    def _lost_data(self, sid: str, size: int, committed: int) -> CorruptStoreError:
        data_name, sidecar_name = _file_names(sid)
        return CorruptStoreError(
            f"session {sid!r}: {self._where(data_name)} holds {size} bytes, but "
            f"{sidecar_name} records {committed} committed bytes: committed entries were "
            "lost (run 'prism-om check --repair' to cut the session back to its last "
            "valid entry)",
            url=self.url,
        )

    def _refresh_session(self, sid: str) -> None:
        data_name, _ = _file_names(sid)
        sidecar = self._read_sidecar(sid)
        if sidecar is not None and sidecar.deleting is not None:
            self._being_deleted(sid, sidecar.deleting)
            return
        self._deleting.discard(sid)
        size = self._data_size(data_name)
        state = self._files.get(sid)
        if size is None:
            if sidecar is not None and sidecar.committed > 0:
                raise self._lost_data(sid, 0, sidecar.committed)
            if state is not None and state.loaded > 0 and sidecar is None and state.has_sidecar:
                # Both files gone, and they had committed entries: delete_session (in this
                # process or another) erased the session.
                self._index.drop_session(sid)
                del self._files[sid]
                return
            if state is not None and state.loaded > 0:
                raise CorruptStoreError(
                    f"{self._where(data_name)} disappeared after {state.loaded} bytes of "
                    "entries were read from it",
                    url=self.url,
                )
            return  # no such session (yet)
        if sidecar is not None and sidecar.committed > size:
            raise self._lost_data(sid, size, sidecar.committed)
        if state is None:
            state = self._files[sid] = _FileState()
        trusted = sidecar is not None and state.loaded <= sidecar.committed
        end = sidecar.committed if trusted and sidecar is not None else size
        if end < state.loaded:
            raise CorruptStoreError(
                f"{self._where(data_name)} is shorter ({end} bytes) than the entries already "
                f"read from it ({state.loaded} bytes): it was truncated or replaced",
                url=self.url,
            )
        if end > state.loaded:
            chunk = self._read_file(data_name, state.loaded, end - state.loaded)
            if trusted and sidecar is not None and state.loaded == 0 and chunk[:1] == b"\0":
                # An entry line starts with "{": an older prism-om's delete, killed once
                # it had begun zeroing the file. The session is gone.
                recorded = sidecar.summary.entries if sidecar.summary is not None else 0
                self._being_deleted(sid, recorded)
                return
            if trusted and not chunk.endswith(b"\n"):
                # The committed length is not at a line end: the sidecar does not describe
                # this file (hand edits), so fall back to counting complete lines.
                trusted = False
                chunk = self._read_file(data_name, state.loaded, size - state.loaded)
            load_chunk(self, sid, state, chunk, trusted=trusted)
            if self._lock_fd is None:
                self._check_unmoved(sid, end if trusted else None)
        state.has_sidecar = trusted
        state.summarised = trusted and sidecar is not None and sidecar.summary is not None
        if trusted and sidecar is not None:
            self._apply_sidecar_leaf(sid, sidecar.leaf)

    def _check_unmoved(self, sid: str, committed: int | None) -> None:
        """A lockless reader's second look at the sidecar, after reading data under it.

        Committed bytes never change until a delete has committed its intent, so data
        read under a sidecar that still commits them (or, for a file read without one,
        that is no intent) was whole; anything else may have been zeroed under the read.
        """
        again = self._read_sidecar(sid)
        if again is not None and again.deleting is not None:
            raise _FilesMoved(f"session {sid!r} is being deleted", url=self.url)
        if committed is not None and (again is None or again.committed < committed):
            raise _FilesMoved(f"session {sid!r} changed while read", url=self.url)

    def _being_deleted(self, sid: str, count: int) -> None:
        """A delete's intent is on disk: the session is gone. A writer finishes the
        erasure (its deleter died: a live one would hold the lock); a reader forgets
        what it loaded of the session and reads it as no session."""
        if self._exclusive:
            finish_delete(self, sid, count)
            return
        self._deleting.add(sid)
        self._forget_session(sid)

    def _apply_sidecar_leaf(self, sid: str, leaf: str | None) -> None:
        tree = self._index.trees.get(sid)
        # An unknown leaf leaves the last loaded entry as the leaf, like a missing sidecar.
        if tree is not None and leaf is not None and self._index.session_of(leaf) == sid:
            tree.leaf = leaf

    # -- listing and summaries -------------------------------------------------------------

    def _summary(self, sid: str) -> SessionSummary:
        return self._index.summary(sid)

    def _summary_of(self, sid: str) -> SessionSummary:
        """From the index when loaded, else from the sidecar; loads only when it must."""
        if sid in self._files and sid not in self._damaged:
            self._ensure_session(sid)
            return self._summary(sid)
        data_name, _ = _file_names(sid)
        for _ in range(_MOVED_RETRIES):
            sidecar = self._read_sidecar(sid)
            if sidecar is not None and sidecar.deleting is not None:
                self._deleting.add(sid)
                return SessionSummary(sid, 0, 0, 0, None)
            size = self._data_size(data_name)
            if sidecar is None or size is None or sidecar.committed <= size:
                break
            if self._lock_fd is not None or self._read_sidecar(sid) == sidecar:
                # Cheap to see and must not be hidden behind the sidecar's old counts.
                error = self._lost_data(sid, size, sidecar.committed)
                self._damaged[sid] = (self._signature(sid), error)
                raise error
            # A lockless reader saw a sidecar from before a delete and the data from
            # after it: look again.
        else:
            raise StoreBusyError(
                f"session {sid!r}: its files in {self._path!r} kept changing while read; retry",
                session_id=sid,
                url=self.url,
            )
        if sidecar is not None and sidecar.summary is not None and sid not in self._damaged:
            if size and sidecar.committed and self._zeroed(data_name):
                # An older prism-om's delete killed after zeroing: reads find no entries,
                # so neither do lists.
                return SessionSummary(sid, 0, 0, 0, None)
            return sidecar.summary
        self._ensure_session(sid)
        return self._summary(sid)

    def _zeroed(self, data_name: str) -> bool:
        """The data file starts with a NUL, as one ``delete_session`` zeroed does (an
        entry line starts with ``{``, and a sidecar commits only whole lines)."""
        return self._read_file(data_name, 0, 1) == b"\0"

    def _sessions_sync(self) -> builtins.list[str]:
        with self._locked(exclusive=False):
            self._refresh()
            self._read_manifest()
            found = []
            for sid in self._on_disk():
                try:
                    if self._summary_of(sid).entries == 0:
                        continue  # a file that never committed an entry is no session yet
                except (StoreBusyError, StoreClosedError):
                    raise
                except StoreError:
                    pass  # damaged, but a session: its reads say what is wrong
                found.append(sid)
            return found

    def _summaries_sync(self) -> builtins.list[SessionSummary]:
        with self._locked(exclusive=False):
            self._refresh()
            self._read_manifest()
            found = []
            for sid in self._on_disk():
                try:
                    summary = self._summary_of(sid)
                except (StoreBusyError, StoreClosedError):
                    raise
                except StoreError:
                    continue  # recorded in self._damaged
                if summary.entries:
                    found.append(summary)
            return found

    # -- parsing -------------------------------------------------------------------------

    # -- writing ---------------------------------------------------------------------------

    def _append_sync(
        self,
        batch: Sequence[SessionEntry],
        at_leaf: bool = False,
        expected_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> builtins.list[SessionEntry]:
        sid = batch[0].session_id
        data_name, _ = _file_names(sid)
        if at_leaf:
            # Only the first entry's parent waits for the leaf; the rest chain within.
            batch = chain_at_leaf(batch, batch[0].parent_id)
        # Serialise before taking the lock, so a big batch does not hold up other processes.
        lines = [entry.to_json().encode() + b"\n" for entry in batch]
        encoding, counts = self._count_tokens(batch)
        with self._locked(exclusive=True):
            self._refresh_for_write(sid)
            if at_leaf:
                leaf = self._index.leaf(sid)
                head = None if leaf is None else self._index.memory_heads[leaf]
                check_memory_head(sid, expected_head, head)
                if batch[0].parent_id != leaf:
                    batch = chain_at_leaf(batch, leaf)
                    lines[0] = batch[0].to_json().encode() + b"\n"
            payload = b"".join(lines)
            self._load_owners(batch)
            self._index.check(batch)
            self._bump_counter(pending=sid)
            try:
                fd = self._open_for_append(sid, data_name)
                try:
                    state = self._files.setdefault(sid, _FileState())
                    if sid not in self._index.trees:
                        self._append_manifest(sid)
                    self._repair_tail(fd, state, data_name)
                    if not state.has_sidecar:
                        # A crash in the write below must find a committed length to cut
                        # back to.
                        self._write_sidecar(sid, state.loaded, self._index.leaf(sid))
                        state.has_sidecar = state.summarised = True
                    after = _with_batch(self._summary(sid), self._index, batch)
                    committed = self._write_batch(fd, sid, state, payload, batch, after)
                finally:
                    os.close(fd)
            finally:
                self._clear_pending()
            self._index.apply(batch)
            self._place_written(sid, committed - len(payload), batch, lines)
            state.loaded = committed
            state.lines += len(batch)
            state.parents.extend(e.parent_id for e in batch)
            state.kinds.extend(kind_of(e) for e in batch)
            # Kept only now: the ids are this batch's entries.
            self._token_cache.setdefault(encoding, {}).update(counts)
            self._after_own_change()
            self._maybe_write_index(sid, state)
        return builtins.list(batch)

    def _place_written(
        self,
        sid: str,
        offset: int,
        batch: Sequence[SessionEntry],
        lines: Sequence[bytes],
    ) -> None:
        """Hold the batch's messages by their place in the file, the newest cached."""
        entries = lazy(self)
        for entry, line in zip(batch, lines, strict=True):
            if entry.kind == "message":
                entries.keep_at(entry.id, sid, offset, len(line) - 1)
                entries.remember(entry, len(line) - 1)
            offset += len(line)

    def _maybe_write_index(self, sid: str, state: _FileState) -> None:
        """Rewrite the session's index sidecar when enough lines are missing from it.

        Only a file of entry lines alone (no blank line, no unterminated entry), all of
        them committed, is indexed. The index is a cache: written without fsync, and any
        failure leaves the old one (or none), which a reopen checks before use.
        """
        tree = self._index.trees.get(sid)
        count = state.lines
        if (
            not _index_due(count, state.indexed)
            or tree is None
            or not state.has_sidecar
            or state.open_line
            or not count == len(state.kinds) == len(tree.order)
        ):
            return
        data_name, _ = _file_names(sid)
        name = index_name(sid)
        with contextlib.suppress(OSError, StoreError):
            prefix = self._read_file(data_name, 0, state.loaded)
            if len(prefix) != state.loaded:
                return
            kinds = "".join(state.kinds)
            body = index_body(
                sid,
                prefix,
                tree.order,
                state.parents,
                kinds,
                tree.last_activity,
                self._line_tokens(tree.order, kinds),
            )
            temp = f"{name}.tmp"
            self._write_temp(temp, body)
            self._index_fault_point(sid)
            os.replace(temp, name, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
            state.indexed = count

    def _write_temp(self, temp: str, body: bytes, *, sync: bool = False) -> None:
        """Write ``body`` to the fresh file ``temp`` in the store's directory (never
        through a link), fsynced when ``sync``; the caller renames it into place."""
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=self._dir_fd,
        )
        try:
            _write_all(fd, body)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _count_tokens(batch: Sequence[SessionEntry]) -> tuple[str, dict[str, int]]:
        """The batch's message token counts, as ``branch_tokens`` counts them, taken
        before the lock: an index sidecar written later carries them without reading
        its lines again."""
        estimator = get_estimator()
        messages = [e for e in batch if e.kind == "message"]
        counts = dict(zip((e.id for e in messages), estimator.count_entries(messages), strict=True))
        return estimator.name, counts

    def _line_tokens(self, ids: Sequence[str], kinds: str) -> tuple[str, builtins.list[int]]:
        """``(encoding, count per line)`` for an index sidecar; lines loaded without
        counts (an older sidecar, another encoding) are read and counted once here."""
        estimator = get_estimator()
        counted = self._token_cache.setdefault(estimator.name, {})
        entries = self._index.entries
        tokens = []
        for entry_id, kind in zip(ids, kinds, strict=True):
            count = 0 if kind == "x" else counted.get(entry_id)
            if count is None:
                count = counted[entry_id] = estimator.count_entry(entries[entry_id])
            tokens.append(count)
        return estimator.name, tokens

    def _index_fault_point(self, sid: str) -> None:
        """A seam for tests: called between writing an index sidecar and renaming it."""

    def _set_leaf_sync(self, sid: str, entry_id: str) -> None:
        with self._locked(exclusive=True):
            self._refresh_for_write(sid)
            self._index.resolve_leaf(sid, entry_id)
            tree, state = self._index.trees[sid], self._files[sid]
            if tree.leaf == entry_id and state.has_sidecar and state.summarised:
                return
            self._bump_counter(pending=sid)
            try:
                data_name, _ = _file_names(sid)
                fd = self._open_for_append(sid, data_name)
                try:
                    self._repair_tail(fd, state, data_name)
                finally:
                    os.close(fd)
                self._write_sidecar(sid, state.loaded, entry_id)
            finally:
                self._clear_pending()
            state.has_sidecar = state.summarised = True
            tree.leaf = entry_id
            self._after_own_change()

    def _refresh_for_write(self, sid: str) -> None:
        """Clear debris, know every id of the store (they are store-wide), check ``sid``."""
        remove_debris(self)
        self._refresh()
        if not self._all_loaded:
            self._know_all_ids()
        if sid in self._files or sid in self._damaged or sid in self._foreign.files:
            # Hand edits do not bump the counter; look at the file about to be written
            # anyway, so complete lines added by hand to a file without a sidecar are
            # loaded rather than cut away as an interrupted append. A damaged session
            # raises here: it is never written over.
            self._ensure_session(sid, refresh=True)
        if not self._swept:
            sweep_debris(self)
            self._swept = True
        backfill_sidecars(self)

    def _know_all_ids(self) -> None:
        """Make every session's ids known: loaded, vouched for by ``.ids``, or loaded now.

        Rechecked only when another process changed something since the last time; a
        session ``.ids`` cannot vouch for is loaded, and then ``.ids`` is rewritten so
        the next process need not load it.
        """
        if self._seen is not None and self._seen == self._ids_seen:
            return
        self._read_manifest()
        on_disk = self._on_disk()
        records: dict[str, tuple[FileKey, builtins.list[str]]] | None = None
        loaded = 0  # entries of sessions loaded for want of a record
        for sid in on_disk:
            if sid in self._files or sid in self._damaged:
                continue
            key = self._file_key(sid)
            known = self._foreign.files.get(sid)
            if key is not None and known is not None and known[0] == key:
                continue
            if records is None:
                try:
                    records = read_ids(self._read_file(IDS_NAME, 0))
                except StoreError:
                    records = {}
            record = records.get(sid)
            if key is not None and record is not None and record[0] == key:
                self._foreign.add(sid, key, record[1])
            else:
                self._load_quietly(sid)
                tree = self._index.trees.get(sid)
                loaded += len(tree.order) if tree is not None else 0
        for sid in set(self._foreign.files).difference(on_disk):
            self._foreign.drop(sid)
        if _ids_due(loaded):
            self._write_ids(on_disk)
        self._ids_seen = self._seen

    def _file_key(self, sid: str) -> FileKey | None:
        data_name, _ = _file_names(sid)
        try:
            info = os.stat(data_name, dir_fd=self._dir_fd, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        return info.st_ino, info.st_size, info.st_mtime_ns

    def _write_ids(self, on_disk: Iterable[str]) -> None:
        """Replace ``.ids`` with a record of every session whose ids are known."""
        sessions: dict[str, tuple[FileKey, Sequence[str]]] = {}
        for sid in on_disk:
            known = self._foreign.files.get(sid)
            state, tree = self._files.get(sid), self._index.trees.get(sid)
            if known is not None:
                sessions[sid] = known
            elif state is not None and tree is not None and not state.open_line:
                key = self._file_key(sid)
                if key is not None and key[1] == state.loaded and sid not in self._damaged:
                    sessions[sid] = (key, tree.order)
        temp = IDS_NAME + ".tmp"
        with contextlib.suppress(OSError):  # a cache: the next process rebuilds it
            self._write_temp(temp, ids_body(sessions))
            os.replace(temp, IDS_NAME, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)

    def _load_owners(self, batch: Sequence[SessionEntry]) -> None:
        """Load each unloaded session holding an id the batch uses or names as a parent,
        so the rule check raises exactly what it raises with every session loaded."""
        owner = self._foreign.owner
        if not owner:
            return
        for entry in batch:
            for ref in (entry.id, entry.parent_id):
                sid = owner.get(ref) if ref is not None else None
                if sid is not None:
                    self._load_quietly(sid)

    def _after_own_change(self) -> None:
        """Note this process's own write: what it knew of other sessions still holds."""
        current = self._ids_seen == self._seen
        self._seen = self._change_key()
        if current:
            self._ids_seen = self._seen

    def _open_for_append(self, sid: str, data_name: str) -> int:
        known = sid in self._files
        flags = _APPEND_FLAGS if known else _APPEND_FLAGS | os.O_EXCL
        try:
            return os.open(data_name, flags, 0o644, dir_fd=self._dir_fd)
        except FileExistsError:
            # The scan did not see this name, yet it exists: on a case-insensitive
            # filesystem it is another session's file, which must not be touched.
            if data_name not in os.listdir(self._dir_fd):
                raise InvalidSessionIdError(
                    f"session id {sid!r} names the same file as another session here "
                    "(the filesystem ignores case)",
                    url=self.url,
                ) from None
            raise StoreError(
                f"{self._where(data_name)} appeared while appending; retry the append", url=self.url
            ) from None
        except OSError as exc:
            raise StoreError(
                f"opening {self._where(data_name)}: {exc.strerror}", url=self.url
            ) from exc

    def _append_manifest(self, sid: str, *, deleted: bool = False) -> None:
        line = (DELETED_MARK if deleted else "").encode() + sid.encode() + b"\n"
        with _io(f"writing {self._where(MANIFEST_NAME)}"):
            fd = os.open(MANIFEST_NAME, _APPEND_FLAGS, 0o644, dir_fd=self._dir_fd)
            try:
                if os.fstat(fd).st_size > self._manifest_offset:
                    line = b"\n" + line  # end a half-written line a crash left behind
                _write_all(fd, line)
                if self._fsync:
                    os.fsync(fd)
                # The refresh just before read every line up to here; do not reread ours.
                self._manifest_offset = os.fstat(fd).st_size
            finally:
                os.close(fd)
        self._manifest.pop(sid, None)
        if not deleted:
            self._manifest[sid] = None

    def _repair_tail(self, fd: int, state: _FileState, data_name: str) -> None:
        """Truncate an interrupted batch and end an unterminated entry before writing."""
        with _io(f"recovering {self._where(data_name)}"):
            repaired = False
            if os.fstat(fd).st_size > state.loaded:
                os.ftruncate(fd, state.loaded)
                repaired = True
            if state.open_line:
                _write_all(fd, b"\n")
                state.loaded += 1
                state.open_line = False
                repaired = True
            if repaired and self._fsync:
                os.fsync(fd)

    def _write_batch(
        self,
        fd: int,
        sid: str,
        state: _FileState,
        payload: bytes,
        batch: Sequence[SessionEntry],
        summary: SessionSummary,
    ) -> int:
        """Write a batch, then commit it by replacing the sidecar; return its end."""
        committed = state.loaded + len(payload)
        try:
            with _io(f"appending to {self._where(sid + DATA_SUFFIX)}"):
                _write_all(fd, payload)
                if self._fsync:
                    os.fsync(fd)
            # Between the data and its commit: a fault here leaves uncommitted bytes.
            self._append_fault_point(batch)
            self._write_sidecar(sid, committed, batch[-1].id, summary)
        except BaseException:
            # Best effort only: whatever stays beyond the committed length is cut by the
            # next writer, and the error that matters is the one being raised.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, state.loaded)
            raise
        return committed

    def _write_sidecar(
        self,
        sid: str,
        committed: int,
        leaf: str | None,
        summary: SessionSummary | None = None,
        *,
        sync: bool = True,
    ) -> None:
        """Replace the sidecar atomically: temp file, fsync, rename, fsync directory.

        ``summary`` describes the session at ``committed`` bytes; by default, the index's.
        """
        body = _sidecar_body(committed, leaf, summary or self._summary(sid))
        self._replace_sidecar(sid, body, sync=sync)

    def _replace_sidecar(self, sid: str, body: bytes, *, sync: bool = True) -> None:
        _, final = _file_names(sid)
        temp = f".{final}.tmp"
        sync = sync and self._fsync
        with _io(f"writing {self._where(final)}"):
            self._write_temp(temp, body, sync=sync)
            os.replace(temp, final, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
            if sync:
                os.fsync(self._dir_fd)
