"""The JSONL adapter: one append-only, human-readable log file per session.

File layout, all inside one directory::

    <session_id>.jsonl       the session's entries, one JSON object per line
                             (``entry.model_dump_json(by_alias=True)``), in append order
    <session_id>.leaf.json   sidecar: ``{"leaf": <entry id>, "committedBytes": <n>}``,
                             the persisted current leaf and the length of the data file
                             that whole batches have been written to
    .<session_id>.leaf.json.tmp   the next sidecar, written in full, then renamed over it
    .sessions                session ids in order of creation, one per line
    .lock                    the ``flock`` target; holds a change counter

Session files hold entries only, so each stays a readable session log. Session ids are
validated names (no separators, no dot-only names) and every file is opened relative to
the directory's descriptor with ``O_NOFOLLOW``, so no id and no symbolic link can make
the store touch a file outside the directory.

Durability. A batch is written with one ``os.write`` of all its lines, then (with
``fsync=True``, the default) fsynced; only then is the sidecar replaced atomically
(write a temporary file, fsync it, rename it over the sidecar, fsync the directory), and
that rename is the commit. With ``fsync=True`` a returned append survives power loss.
With ``fsync=False`` nothing is fsynced: a returned append survives the process being
killed (the kernel still holds the bytes) but not power loss or a kernel crash, after
which the newest batches may be missing and the store may need the repair described
below. Before the first batch of a session (or of a file that has no sidecar) a sidecar
for the current length is written first, so every batch has a committed length to fall
back to.

Recovery rules, applied when a file is read (bytes are parsed as bytes, never decoded
as a whole):

* Bytes beyond the sidecar's committed length belong to a batch whose append never
  returned: readers ignore them and the next writer truncates them away, so a batch is
  all or nothing. (Lines appended by hand to a file that has a sidecar are therefore
  dropped; append through the store instead.)
* A file without a usable sidecar (missing, unparsable, longer than the file, or not at
  a line end: a hand-made file, or damage after a power loss with ``fsync=False``) counts
  every complete line as committed, and its leaf is its last entry. An unterminated last
  line that is not valid JSON, a cut inside a multi-byte character, and trailing NUL
  padding are an interrupted append: ignored, and truncated by the next writer. An
  unterminated last line that is a complete entry is kept (the next writer ends it).
* A malformed line followed by further lines, or any malformed line inside the
  committed length, is corruption: ``CorruptStoreError`` names the file and the line.
  Every line must also keep the store rules as it is loaded (known parent in the same
  session, one root, unique ids, the file's own session id), else ``CorruptStoreError``
  with its line number.

Concurrency. Writers take an exclusive ``flock`` on ``.lock`` and hold it across
refresh, check, data write and sidecar replace; readers take a shared lock. Every
writer bumps the counter in ``.lock`` before it changes a file, so a process notices
other processes' appends and leaf moves before each read or write by comparing the
counter (and the directory's mtime, which catches a session file dropped in by hand),
then loads only the new committed bytes of each session. Locks are polled, so a lock
held past ``lock_timeout`` raises ``StoreBusyError``. File I/O runs in a worker thread;
coroutines of one store are serialised by an ``asyncio.Lock``.

Limits: a local POSIX filesystem (``flock`` is not reliable over NFS); never delete
``.lock`` while stores are open; on a case-insensitive filesystem two session ids that
differ only in case cannot both be stored (the second is refused). Hand edits to an
open store are seen after the next write by any process, or on reopen.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import fcntl
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import ParamSpec, Self, TypeVar

from .._gc import collector_paused
from ..entries import SessionEntry, entry_from_wire, validate_session_id
from ..errors import (
    CorruptStoreError,
    InvalidEntryError,
    InvalidSessionIdError,
    StoreBusyError,
    StoreClosedError,
    StoreError,
    StoreRuleError,
)
from ._derived import BranchDerivedReads
from ._shield import finish_then_cancel
from ._tree import TreeIndex
from .base import (
    ANY_MEMORY_HEAD,
    AnyMemoryHead,
    chain_at_leaf,
    check_batch_shape,
    check_memory_head,
)

__all__ = ["JsonlStore"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

DATA_SUFFIX = ".jsonl"
SIDECAR_SUFFIX = ".leaf.json"
LOCK_NAME = ".lock"
MANIFEST_NAME = ".sessions"

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_LOCK_POLL_FIRST = 0.0005
_LOCK_POLL_MAX = 0.005


@dataclass(frozen=True)
class _Sidecar:
    committed: int
    leaf: str | None


@dataclass
class _FileState:
    """How much of one session file the index holds."""

    loaded: int = 0  # bytes applied to the index: always a committed prefix of the file
    lines: int = 0  # lines in those bytes, so errors can name a line number
    open_line: bool = False  # the loaded bytes end in a complete entry without its newline
    has_sidecar: bool = False  # the sidecar on disk is usable and matches ``loaded``


@contextlib.contextmanager
def _io(action: str) -> Iterator[None]:
    """Translate ``OSError`` into ``StoreError`` that says what was being done."""
    try:
        yield
    except OSError as exc:
        raise StoreError(f"{action}: {exc.strerror or exc}") from exc


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` with one ``os.write``, looping only if the kernel writes short."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(f"write returned {written}")
        view = view[written:]


def _read_all(fd: int, offset: int, length: int) -> bytes:
    parts: list[bytes] = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(parts)


def _session_of(name: str) -> str | None:
    """The session id a directory entry stores, or None for any other file."""
    if not name.endswith(DATA_SUFFIX):
        return None
    try:
        return validate_session_id(name[: -len(DATA_SUFFIX)])
    except InvalidSessionIdError:
        return None


def _file_names(session_id: str) -> tuple[str, str]:
    """The data and sidecar names of a session; refuses any id that is not a plain name."""
    validate_session_id(session_id)
    data = session_id + DATA_SUFFIX
    if os.path.basename(data) != data or os.sep in data or (os.altsep or os.sep) in data:
        raise InvalidSessionIdError(f"session id {session_id!r} would leave the store directory")
    return data, session_id + SIDECAR_SUFFIX


def _parse_sidecar(raw: bytes) -> _Sidecar | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    committed, leaf = value.get("committedBytes"), value.get("leaf")
    if isinstance(committed, bool) or not isinstance(committed, int) or committed < 0:
        return None
    if leaf is not None and not isinstance(leaf, str):
        return None
    return _Sidecar(committed, leaf)


class JsonlStore(BranchDerivedReads):
    """A directory of JSONL session logs; see the module docstring for the format.

    Open with ``await JsonlStore.open(directory)``. ``fsync=True`` (the default) makes
    every returned append durable across power loss; ``fsync=False`` skips every fsync,
    so appends survive a crash of the application but not of the machine.
    """

    def __init__(self, path: str, dir_fd: int, lock_fd: int, *, fsync: bool, lock_timeout: float):
        self.url = f"jsonl:{path}"
        self._path = path
        self._dir_fd = dir_fd
        self._lock_fd = lock_fd
        self._fsync = fsync
        self._lock_timeout = lock_timeout
        self._index = TreeIndex()
        self._files: dict[str, _FileState] = {}
        # Session ids of ``.sessions`` by their last line (a re-created session moves last).
        self._manifest: dict[str, None] = {}
        self._manifest_offset = 0
        # (change counter, directory mtime) as of the last refresh; None forces a scan.
        self._seen: tuple[int, int] | None = None
        self._closed = False
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
        """Open (creating if missing) the store in ``directory`` and read it."""
        return await asyncio.to_thread(cls._open_sync, os.fspath(directory), fsync, lock_timeout)

    @classmethod
    def _open_sync(cls, directory: str, fsync: bool, lock_timeout: float) -> JsonlStore:
        path = os.path.abspath(directory)
        with _io(f"opening JSONL store {path!r}"):
            os.makedirs(path, exist_ok=True)
            dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                lock_fd = os.open(
                    LOCK_NAME,
                    os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o644,
                    dir_fd=dir_fd,
                )
            except BaseException:
                os.close(dir_fd)
                raise
        store = cls(path, dir_fd, lock_fd, fsync=fsync, lock_timeout=lock_timeout)
        try:
            with store._locked(exclusive=False):
                store._refresh()
        except BaseException:
            store._close_sync()
            raise
        return store

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
            os.close(self._lock_fd)
            os.close(self._dir_fd)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the SessionStore protocol -------------------------------------------------------

    async def append(self, entry: SessionEntry) -> None:
        await self.append_many([entry])

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        batch = check_batch_shape(entries)
        self._ensure_open()
        if batch:
            await finish_then_cancel(self._run(self._append_sync, batch))

    async def append_at_leaf(
        self,
        entries: Sequence[SessionEntry],
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> builtins.list[SessionEntry]:
        batch = check_batch_shape(entries)
        self._ensure_open()
        if not batch:
            return []
        return await finish_then_cancel(
            self._run(self._append_sync, batch, True, expected_memory_head)
        )

    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None:
        sid = self._session_arg(session_id)
        return await self._read(lambda index: index.memory_head(sid, leaf_id))

    async def get(self, entry_id: str) -> SessionEntry | None:
        return await self._read(lambda index: index.entries.get(entry_id))

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        sid = self._session_arg(session_id)
        return await self._read(lambda index: index.session_entries(sid))

    async def branch(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        sid = self._session_arg(session_id)
        return await self._read(lambda index: index.branch(sid, leaf_id))

    async def leaves(self, session_id: str) -> builtins.list[str]:
        sid = self._session_arg(session_id)
        return await self._read(lambda index: index.leaves(sid))

    async def leaf(self, session_id: str) -> str | None:
        sid = self._session_arg(session_id)
        return await self._read(lambda index: index.leaf(sid))

    async def set_leaf(self, session_id: str, entry_id: str) -> None:
        sid = self._session_arg(session_id)
        await finish_then_cancel(self._run(self._set_leaf_sync, sid, entry_id))

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool:
        sid = self._session_arg(session_id)
        return await self._read(lambda index: index.is_on_branch(sid, entry_id, leaf_id))

    async def sessions(self) -> builtins.list[str]:
        return await self._read(lambda index: builtins.list(index.trees))

    # -- plumbing between the event loop and the worker thread ---------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.url!r} is closed")

    def _session_arg(self, session_id: str) -> str:
        # Same order as the memory store: a closed store first, then a bad id.
        self._ensure_open()
        return validate_session_id(session_id)

    async def _run(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        self._ensure_open()
        async with self._lock:
            return await asyncio.to_thread(fn, *args, **kwargs)

    async def _read(self, query: Callable[[TreeIndex], _T]) -> _T:
        return await self._run(self._read_sync, query)

    def _read_sync(self, query: Callable[[TreeIndex], _T]) -> _T:
        with self._locked(exclusive=False):
            self._refresh()
            return query(self._index)

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        """Hold the thread lock and the directory's flock; map stray OS errors."""
        with self._thread_lock:
            self._ensure_open()
            self._flock(fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                with _io(f"JSONL store {self._path!r}"):
                    yield
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _flock(self, operation: int) -> None:
        # Polled rather than blocking, so a stuck writer elsewhere ends in StoreBusyError
        # instead of a worker thread that waits forever.
        deadline = time.monotonic() + self._lock_timeout
        delay = _LOCK_POLL_FIRST
        while True:
            try:
                fcntl.flock(self._lock_fd, operation | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            except OSError as exc:
                raise StoreError(f"locking {self._where(LOCK_NAME)}: {exc.strerror}") from exc
            if time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"JSONL store {self._path!r} stayed locked by another process for "
                    f"{self._lock_timeout:g} s"
                )
            time.sleep(delay)
            delay = min(delay * 2, _LOCK_POLL_MAX)

    def _where(self, name: str) -> str:
        return os.path.join(self._path, name)

    # -- noticing other processes' writes ------------------------------------------------

    def _read_counter(self) -> int | None:
        try:
            return int(os.pread(self._lock_fd, 32, 0))
        except ValueError:  # empty (nobody wrote yet) or damaged: always rescan
            return None

    def _change_key(self) -> tuple[int, int] | None:
        counter = self._read_counter()
        if counter is None:
            return None
        return counter, os.fstat(self._dir_fd).st_mtime_ns

    def _bump_counter(self) -> None:
        """Announce a change; called under the exclusive lock before any file changes.

        Bumping first means a crash between the bump and the write costs readers one
        needless rescan, while bumping last could hide a committed batch from them.
        """
        current = self._read_counter()
        value = current + 1 if current is not None else time.time_ns()
        with _io(f"writing {self._where(LOCK_NAME)}"):
            os.pwrite(self._lock_fd, b"%020d\n" % value, 0)

    def _refresh(self) -> None:
        """Bring the index up to date with every committed byte in the directory."""
        key = self._change_key()
        if key is not None and key == self._seen:
            return
        self._read_manifest()
        for sid in self._scan_order():
            self._refresh_session(sid)
        self._seen = key

    def _scan_order(self) -> builtins.list[str]:
        """Sessions to refresh: those in the index first, then new ones by creation."""
        on_disk = {sid for name in os.listdir(self._dir_fd) if (sid := _session_of(name))}
        known = [sid for sid in self._index.trees]
        rank = {sid: i for i, sid in enumerate(self._manifest)}
        rest = (on_disk | self._files.keys()) - self._index.trees.keys()
        # Files missing from .sessions (hand-made) come after the listed ones, by name.
        return known + sorted(rest, key=lambda sid: (rank.get(sid, len(rank)), sid))

    def _read_manifest(self) -> None:
        data = self._read_file(MANIFEST_NAME, self._manifest_offset)
        end = data.rfind(b"\n") + 1  # a crash may leave half a line: wait for its end
        for raw in data[:end].splitlines():
            try:
                sid = validate_session_id(raw.decode("ascii", "replace").strip())
            except InvalidSessionIdError:
                continue
            self._manifest.pop(sid, None)
            self._manifest[sid] = None
        self._manifest_offset += end

    def _read_file(self, name: str, offset: int, length: int | None = None) -> bytes:
        """Bytes of a directory file from ``offset`` (to its end); b"" when it is absent."""
        with _io(f"reading {self._where(name)}"):
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=self._dir_fd)
            except FileNotFoundError:
                return b""
            try:
                if length is None:
                    length = max(os.fstat(fd).st_size - offset, 0)
                return _read_all(fd, offset, length)
            finally:
                os.close(fd)

    def _data_size(self, name: str) -> int:
        with _io(f"reading {self._where(name)}"):
            try:
                info = os.stat(name, dir_fd=self._dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return 0
        if not stat.S_ISREG(info.st_mode):
            raise CorruptStoreError(
                f"{self._where(name)} is not a regular file (symbolic links are not followed)"
            )
        return info.st_size

    def _refresh_session(self, sid: str) -> None:
        data_name, sidecar_name = _file_names(sid)
        state = self._files.setdefault(sid, _FileState())
        sidecar = _parse_sidecar(self._read_file(sidecar_name, 0))
        size = self._data_size(data_name)
        trusted = sidecar is not None and state.loaded <= sidecar.committed <= size
        end = sidecar.committed if trusted and sidecar is not None else size
        if end < state.loaded:
            raise CorruptStoreError(
                f"{self._where(data_name)} is shorter ({end} bytes) than the entries already "
                f"read from it ({state.loaded} bytes): it was truncated or replaced"
            )
        if end > state.loaded:
            chunk = self._read_file(data_name, state.loaded, end - state.loaded)
            if trusted and not chunk.endswith(b"\n"):
                # The committed length is not at a line end: the sidecar does not describe
                # this file (hand edits), so fall back to counting complete lines.
                trusted = False
                chunk = self._read_file(data_name, state.loaded, size - state.loaded)
            self._load_chunk(sid, state, chunk, trusted=trusted)
        state.has_sidecar = trusted
        if trusted and sidecar is not None:
            self._apply_sidecar_leaf(sid, sidecar.leaf)

    def _apply_sidecar_leaf(self, sid: str, leaf: str | None) -> None:
        tree = self._index.trees.get(sid)
        entry = self._index.entries.get(leaf) if leaf is not None else None
        # An unknown leaf leaves the last loaded entry as the leaf, like a missing sidecar.
        if tree is not None and entry is not None and entry.session_id == sid:
            tree.leaf = entry.id

    # -- parsing -------------------------------------------------------------------------

    def _load_chunk(self, sid: str, state: _FileState, chunk: bytes, *, trusted: bool) -> None:
        """Apply the complete lines of ``chunk`` (the file from ``state.loaded`` on)."""
        with collector_paused():
            self._load_lines(sid, state, chunk, trusted=trusted)

    def _load_lines(self, sid: str, state: _FileState, chunk: bytes, *, trusted: bool) -> None:
        pos = 0
        if state.open_line:
            if not trusted and not chunk.rstrip(b"\0").strip():
                return  # still only the padding after the unterminated entry
            if not chunk.startswith(b"\n"):
                raise self._corrupt_line(sid, state.lines, "text continues after a complete entry")
            pos, state.loaded, state.open_line = 1, state.loaded + 1, False
        while (newline := chunk.find(b"\n", pos)) >= 0:
            self._load_line(sid, state, chunk[pos:newline])
            state.loaded += newline + 1 - pos
            pos = newline + 1
        if pos < len(chunk) and not trusted:
            self._load_tail(sid, state, chunk[pos:])

    def _load_tail(self, sid: str, state: _FileState, tail: bytes) -> None:
        """An unterminated last line: an interrupted append unless it is a whole entry."""
        body = tail.rstrip(b"\0")  # NUL padding: blocks a crash allocated but never wrote
        if not body.strip():
            return
        try:
            json.loads(body)
        except ValueError:  # cut mid-line or mid-character: the next writer truncates it
            return
        self._load_line(sid, state, body)
        state.loaded += len(body)
        state.open_line = True

    def _load_line(self, sid: str, state: _FileState, line: bytes) -> None:
        number = state.lines + 1
        if line.strip():  # blank lines are tolerated in hand-made files
            try:
                entry = entry_from_wire(line, where="entry")
            except InvalidEntryError as exc:
                raise self._corrupt_line(sid, number, str(exc)) from exc
            if entry.session_id != sid:
                raise self._corrupt_line(
                    sid, number, f"entry {entry.id!r} belongs to session {entry.session_id!r}"
                )
            try:
                self._index.check([entry])
            except StoreRuleError as exc:
                raise self._corrupt_line(sid, number, str(exc)) from exc
            self._index.apply([entry])
        state.lines = number

    def _corrupt_line(self, sid: str, number: int, problem: str) -> CorruptStoreError:
        return CorruptStoreError(f"{self._where(sid + DATA_SUFFIX)} line {number}: {problem}")

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
            self._index.check(batch)
            self._bump_counter()
            fd = self._open_for_append(sid, data_name)
            try:
                state = self._files.setdefault(sid, _FileState())
                if sid not in self._index.trees:
                    self._append_manifest(sid)
                self._repair_tail(fd, state, data_name)
                if not state.has_sidecar:
                    # A crash in the write below must find a committed length to cut back to.
                    self._write_sidecar(sid, state.loaded, self._index.leaf(sid))
                    state.has_sidecar = True
                committed = self._write_batch(fd, sid, state, payload, batch[-1].id)
            finally:
                os.close(fd)
            self._index.apply(batch)
            state.loaded = committed
            state.lines += len(batch)
            self._seen = self._change_key()
        return builtins.list(batch)

    def _set_leaf_sync(self, sid: str, entry_id: str) -> None:
        with self._locked(exclusive=True):
            self._refresh_for_write(sid)
            self._index.resolve_leaf(sid, entry_id)
            tree, state = self._index.trees[sid], self._files[sid]
            if tree.leaf == entry_id and state.has_sidecar:
                return
            self._bump_counter()
            data_name, _ = _file_names(sid)
            fd = self._open_for_append(sid, data_name)
            try:
                self._repair_tail(fd, state, data_name)
            finally:
                os.close(fd)
            self._write_sidecar(sid, state.loaded, entry_id)
            state.has_sidecar = True
            tree.leaf = entry_id
            self._seen = self._change_key()

    def _refresh_for_write(self, sid: str) -> None:
        self._refresh()
        if sid in self._files:
            # Hand edits do not bump the counter; look at the file about to be written
            # anyway, so complete lines added by hand to a file without a sidecar are
            # loaded rather than cut away as an interrupted append.
            self._refresh_session(sid)

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
                    "(the filesystem ignores case)"
                ) from None
            raise StoreError(
                f"{self._where(data_name)} appeared while appending; retry the append"
            ) from None
        except OSError as exc:
            raise StoreError(f"opening {self._where(data_name)}: {exc.strerror}") from exc

    def _append_manifest(self, sid: str) -> None:
        line = sid.encode() + b"\n"
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

    def _write_batch(self, fd: int, sid: str, state: _FileState, payload: bytes, leaf: str) -> int:
        """Write a batch, then commit it by replacing the sidecar; return its end."""
        committed = state.loaded + len(payload)
        try:
            with _io(f"appending to {self._where(sid + DATA_SUFFIX)}"):
                _write_all(fd, payload)
                if self._fsync:
                    os.fsync(fd)
            self._write_sidecar(sid, committed, leaf)
        except StoreError:
            # Best effort only: whatever stays beyond the committed length is cut by the
            # next writer, and the error that matters is the one being raised.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, state.loaded)
            raise
        return committed

    def _write_sidecar(self, sid: str, committed: int, leaf: str | None) -> None:
        """Replace the sidecar atomically: temp file, fsync, rename, fsync directory."""
        _, final = _file_names(sid)
        temp = f".{final}.tmp"
        body = json.dumps({"leaf": leaf, "committedBytes": committed}).encode() + b"\n"
        with _io(f"writing {self._where(final)}"):
            fd = os.open(
                temp,
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=self._dir_fd,
            )
            try:
                _write_all(fd, body)
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, final, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
            if self._fsync:
                os.fsync(self._dir_fd)
