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
import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from ..._gc import collector_paused
from ...entries import SessionEntry, entry_from_wire, validate_session_id
from ...errors import (
    CorruptStoreError,
    InvalidEntryError,
    InvalidInputError,
    InvalidSessionIdError,
    ReadOnlyStoreError,
    StoreBusyError,
    StoreClosedError,
    StoreError,
    StoreNotFoundError,
    StoreRuleError,
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
    session_not_found,
)
from ..segment_index.index import TreeIndex, comparable_time
from ..segment_index.lazy_entries import LazyEntries, Span
from ..segment_index.reads import TreeIndexReads
from .id_index import IDS_NAME, FileKey, ForeignIds, ids_body, read_ids
from .index_sidecar import (
    apply_index,
    index_body,
    index_name,
    kind_of,
    read_index,
)

__all__ = ["JsonlStore", "SessionCheck"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

DATA_SUFFIX = ".jsonl"
SIDECAR_SUFFIX = ".leaf.json"
LOCK_NAME = ".lock"
MANIFEST_NAME = ".sessions"
# A ``.sessions`` line ``-<id>`` records that the session was deleted: other processes
# drop what they loaded of it, so a file re-created under the same id is read afresh.
# Not a valid id, so a reader that predates it skips the line.
DELETED_MARK = "-"
# The sidecar format this code writes; it reads every version up to it.
SIDECAR_VERSION = 2
# Where ``.lock`` holds the session a writer is changing (the counter comes first).
_PENDING_AT = 32

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
# A session file gets an index sidecar (see ``index_sidecar``) once this many of its lines
# are not in one, and then again whenever the unindexed lines reach an eighth of the
# indexed ones: rewriting it costs amortised O(1) per appended line.
INDEX_MIN_LINES = 1000
_LOCK_POLL_FIRST = 0.0005
# Adjacent message lines read back are read in one ``pread`` up to this many bytes.
_RUN_BYTES = 1 << 20
# A delete zeroes its data file this many bytes per write.
_ZERO_CHUNK = 1 << 20
# How often a lockless reader looks again at a session whose files changed while it read
# them (another process deleting or re-creating it) before it gives up with StoreBusyError.
_MOVED_RETRIES = 50


def _ids_due(loaded: int) -> bool:
    """Whether ``.ids`` should be rewritten after a write had to load ``loaded`` entries
    of sessions it did not vouch for (a small store loads in no time without it)."""
    return loaded >= INDEX_MIN_LINES


def _index_due(lines: int, indexed: int) -> bool:
    """Whether a session file of ``lines`` lines, ``indexed`` of them in its index
    sidecar, should get a new one (see ``INDEX_MIN_LINES``)."""
    return lines - indexed >= max(INDEX_MIN_LINES, indexed // 8)


_LOCK_POLL_MAX = 0.005


@dataclass(frozen=True)
class _Sidecar:
    committed: int
    leaf: str | None
    version: int = 1
    summary: SessionSummary | None = None
    # Set in a delete's intent (see "Deleting"): how many entries the delete erases.
    deleting: int | None = None


@dataclass
class _FileState:
    """How much of one session file the index holds."""

    loaded: int = 0  # bytes applied to the index: always a committed prefix of the file
    lines: int = 0  # lines in those bytes, so errors can name a line number
    open_line: bool = False  # the loaded bytes end in a complete entry without its newline
    has_sidecar: bool = False  # the sidecar on disk is usable and matches ``loaded``
    summarised: bool = False  # ...and holds the summary (else a write backfills it)
    # Per entry line loaded, in file order: its parent and ``kind_of`` letter, what an
    # index sidecar records; ``indexed`` lines of them are in the one on disk.
    parents: list[str | None] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    indexed: int = 0


@dataclass(frozen=True)
class SessionCheck:
    """What ``check`` found in one session file (``repair`` fills the last three).

    ``problem`` is None for a healthy session; ``entries`` counts the readable entries
    (those before the first damage); ``uncommitted_bytes`` is a torn tail a writer will
    cut. After a repair, ``lost_entries`` is how many entries the cut removed (None when
    the lost bytes cannot be counted in entries), ``lost_bytes`` how many bytes, and
    ``moved_aside`` is True for a file that was not a regular file and left the store.
    """

    session_id: str
    entries: int
    problem: str | None
    uncommitted_bytes: int = 0
    lost_entries: int | None = 0
    lost_bytes: int = 0
    moved_aside: bool = False


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


class _FilesMoved(StoreBusyError):
    """A lockless reader saw a session's files change while it read them: look again."""


def _session_of(name: str) -> str | None:
    """The session id a data file or sidecar belongs to, or None for any other file.

    A sidecar alone counts: if it records committed bytes, its data file was lost.
    """
    for suffix in (DATA_SUFFIX, SIDECAR_SUFFIX):
        if name.endswith(suffix):
            try:
                return validate_session_id(name[: -len(suffix)])
            except InvalidSessionIdError:
                return None
    return None


def _file_names(session_id: str) -> tuple[str, str]:
    """The data and sidecar names of a session; refuses any id that is not a plain name."""
    validate_session_id(session_id)
    data = session_id + DATA_SUFFIX
    if os.path.basename(data) != data or os.sep in data or (os.altsep or os.sep) in data:
        raise InvalidSessionIdError(f"session id {session_id!r} would leave the store directory")
    return data, session_id + SIDECAR_SUFFIX


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse_sidecar(raw: bytes, sid: str) -> _Sidecar | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    committed, leaf = _count(value.get("committedBytes")), value.get("leaf")
    if committed is None or (leaf is not None and not isinstance(leaf, str)):
        return None
    version = _count(value.get("version", 1))
    if version is None:
        return None
    summary = None
    counts = [_count(value.get(k)) for k in ("entries", "messages", "leaves")]
    last = value.get("lastActivity")
    if all(c is not None for c in counts) and (last is None or isinstance(last, str)):
        entries, messages, leaves = (c or 0 for c in counts)
        summary = SessionSummary(sid, entries, messages, leaves, last)
    deleting = None
    if "deleting" in value:
        deleting = _count(value["deleting"])
        if deleting is None:
            return None
    return _Sidecar(committed, leaf, version, summary, deleting)


def _sidecar_body(committed: int, leaf: str | None, summary: SessionSummary) -> bytes:
    body = {
        "leaf": leaf,
        "committedBytes": committed,
        "version": SIDECAR_VERSION,
        "entries": summary.entries,
        "messages": summary.messages,
        "leaves": summary.leaves,
        "lastActivity": summary.last_activity,
    }
    return json.dumps(body).encode() + b"\n"


def _deleting_body(count: int) -> bytes:
    """A delete's intent: an empty session (what a reader that predates the ``deleting``
    key sees too) that names how many entries the delete erases."""
    body = {
        "leaf": None,
        "committedBytes": 0,
        "version": SIDECAR_VERSION,
        "entries": 0,
        "messages": 0,
        "leaves": 0,
        "lastActivity": None,
        "deleting": count,
    }
    return json.dumps(body).encode() + b"\n"


def _with_batch(
    before: SessionSummary, index: TreeIndex, batch: Sequence[SessionEntry]
) -> SessionSummary:
    """The session's summary once ``batch`` (already checked) is applied."""
    in_batch = {e.id for e in batch}
    # A parent stops being a leaf when it gets its first child: new entries are childless
    # until now, stored ones when the index lists no child.
    lost = {
        p
        for e in batch
        if (p := e.parent_id) is not None and (p in in_batch or not index.children.get(p))
    }
    last = before.last_activity
    for entry in batch:
        stamp = comparable_time(entry.timestamp)
        if stamp is not None and (last is None or stamp > last):
            last = stamp
    return SessionSummary(
        before.session_id,
        before.entries + len(batch),
        before.messages + sum(1 for e in batch if e.kind == "message"),
        before.leaves + len(batch) - len(lost),
        last,
    )


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
        self._index.entries = LazyEntries(self._read_lines)
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
        return await finish_then_cancel(self._run(self._delete_sync, sid))

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
        return await self._run(self._check_sync)

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
        return await self._run(self._repair_sync, os.fspath(backup_dir))

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
            self._load_chunk(sid, state, chunk, trusted=trusted)
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
            self._finish_delete(sid, count)
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

    # -- check and repair ------------------------------------------------------------------

    def _check_sync(self) -> builtins.list[SessionCheck]:
        with self._locked(exclusive=False):
            self._refresh()
            self._load_all()
            for sid in builtins.list(self._files):
                self._parse_all(sid)
            return [self._check_session(sid) for sid in self._checked_ids()]

    def _parse_all(self, sid: str) -> None:
        """Parse every message line a load placed unparsed; damage is recorded."""
        tree = self._index.trees.get(sid)
        entries = self._index.entries
        if tree is None or not isinstance(entries, LazyEntries):
            return
        located = [i for i in tree.order if entries.is_located(i)]
        try:
            with collector_paused():
                for at in range(0, len(located), 4096):
                    entries.many(located[at : at + 4096], cache=False)  # parsed, dropped
        except CorruptStoreError as exc:
            self._index.drop_session(sid)
            self._files.pop(sid, None)
            self._damaged[sid] = (self._signature(sid), exc)

    def _checked_ids(self) -> builtins.list[str]:
        # A session a delete has committed to erasing is no session, damaged or not.
        on_disk = [sid for sid in self._on_disk() if sid not in self._deleting]
        return on_disk + sorted(sid for sid in self._damaged if sid not in on_disk)

    def _check_session(self, sid: str) -> SessionCheck:
        data_name, _ = _file_names(sid)
        damaged = self._damaged.get(sid)
        if damaged is not None:
            entries = 0
            with contextlib.suppress(StoreError):
                entries = self._salvage(sid)[1]
                self._index.drop_session(sid)
            return SessionCheck(sid, entries, str(damaged[1]))
        state = self._files.get(sid)
        size = self._data_size(data_name) or 0
        loaded = state.loaded if state is not None else 0
        return SessionCheck(sid, self._summary(sid).entries, None, max(size - loaded, 0))

    def _repair_missing_data(self, sid: str, backup: str, problem: str) -> SessionCheck:
        """A sidecar whose data file is gone: keep the sidecar in the backup, drop it here."""
        _, sidecar_name = _file_names(sid)
        try:
            old = self._read_sidecar(sid)
        except StoreError:
            old = None
        os.rename(sidecar_name, os.path.join(backup, sidecar_name), src_dir_fd=self._dir_fd)
        del self._damaged[sid]
        lost = old.summary.entries if old is not None and old.summary is not None else None
        lost_bytes = old.committed if old is not None else 0
        return SessionCheck(sid, 0, problem, lost_entries=lost, lost_bytes=lost_bytes)

    def _salvage(self, sid: str) -> tuple[_FileState, int]:
        """Load the session's entries up to its first damage into the index.

        Returns the file state (``loaded`` is where the valid entries end) and how many
        entries that is; the caller drops the session again unless it cuts the file.
        """
        data_name, _ = _file_names(sid)
        self._index.drop_session(sid)
        size = self._data_size(data_name) or 0
        data = self._read_file(data_name, 0, size)
        state = _FileState()
        pos = 0
        with collector_paused():
            while (newline := data.find(b"\n", pos)) >= 0:
                try:
                    self._load_line(sid, state, data[pos:newline])
                except CorruptStoreError:
                    break
                pos = state.loaded = newline + 1
        return state, self._summary(sid).entries

    def _repair_sync(self, backup_dir: str) -> builtins.list[SessionCheck]:
        backup = os.path.abspath(backup_dir)
        if os.path.realpath(backup) == os.path.realpath(self._path):
            raise StoreError(
                f"the backup directory {backup!r} must not be the store itself", url=self.url
            )
        with self._locked(exclusive=True):
            self._remove_debris()
            self._refresh()
            self._load_all()
            for sid in builtins.list(self._files):
                self._parse_all(sid)
            self._refuse_backup_overwrite(backup)
            results = []
            for sid in self._checked_ids():
                damage = self._damaged.get(sid)
                if damage is None or not isinstance(damage[1], CorruptStoreError):
                    # Healthy, or not damage a cut can fix (a sidecar of a newer version,
                    # a file this user may not read): reported, never rewritten.
                    results.append(self._check_session(sid))
                    continue
                results.append(self._repair_session(sid, backup))
            self._seen = self._change_key()
            return results

    def _refuse_backup_overwrite(self, backup: str) -> None:
        """Refuse a backup that would replace anything, before any session is touched.

        A backup is the only copy of what a repair cuts away: an earlier backup (or any
        file) in its place must survive, so a clash is bad input, not a reason to copy over.
        """
        if os.path.lexists(backup) and not os.path.isdir(backup):
            raise InvalidInputError(
                f"the backup {backup!r} exists and is not a directory; name a new one",
                url=self.url,
            )
        for sid in self._checked_ids():
            damage = self._damaged.get(sid)
            if damage is None or not isinstance(damage[1], CorruptStoreError):
                continue
            for name in _file_names(sid):
                if os.path.lexists(os.path.join(backup, name)):
                    raise InvalidInputError(
                        f"the backup directory {backup!r} already holds {name!r}, which "
                        "repairing this store would overwrite; name a new backup directory",
                        session_id=sid,
                        url=self.url,
                    )

    def _repair_session(self, sid: str, backup: str) -> SessionCheck:
        data_name, sidecar_name = _file_names(sid)
        problem = str(self._damaged[sid][1])
        os.makedirs(backup, exist_ok=True)
        self._bump_counter()
        try:
            info = os.stat(data_name, dir_fd=self._dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return self._repair_missing_data(sid, backup, problem)
        if not stat.S_ISREG(info.st_mode):
            # Not ours to cut: move the link or directory out of the store, intact.
            for name in (data_name, sidecar_name):
                with contextlib.suppress(FileNotFoundError):
                    os.rename(name, os.path.join(backup, name), src_dir_fd=self._dir_fd)
            del self._damaged[sid]
            return SessionCheck(sid, 0, problem, moved_aside=True, lost_entries=None)
        for name in (data_name, sidecar_name):
            if os.path.lexists(self._where(name)):
                shutil.copy2(self._where(name), os.path.join(backup, name), follow_symlinks=False)
        if self._fsync:
            _fsync_dir(backup)
        try:
            old = self._read_sidecar(sid)
        except StoreError:
            old = None
        state, kept = self._salvage(sid)
        tail = self._read_file(data_name, state.loaded)
        lost_lines = sum(1 for line in tail.split(b"\n") if line.strip(b"\0 \t\r"))
        recorded = old.summary.entries if old is not None and old.summary is not None else None
        lost_entries: int | None = lost_lines
        if old is not None and old.committed > info.st_size:
            # Whole lines vanished with the missing bytes: only the sidecar can count them.
            lost_entries = recorded - kept if recorded is not None else None
        self._truncate(data_name, state.loaded)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(index_name(sid), dir_fd=self._dir_fd)  # described the uncut file
        if kept:
            tree = self._index.trees[sid]
            if old is not None and old.leaf in tree.order:
                tree.leaf = old.leaf
            self._write_sidecar(sid, state.loaded, tree.leaf)
            state.has_sidecar = state.summarised = True
            self._files[sid] = state
        else:
            os.unlink(data_name, dir_fd=self._dir_fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sidecar_name, dir_fd=self._dir_fd)
            self._files.pop(sid, None)
        del self._damaged[sid]
        # Bytes the sidecar committed that are gone count as lost too, not only those cut.
        lost_bytes = max(info.st_size, old.committed if old is not None else 0) - state.loaded
        return SessionCheck(sid, kept, problem, lost_entries=lost_entries, lost_bytes=lost_bytes)

    # -- parsing -------------------------------------------------------------------------

    def _load_chunk(self, sid: str, state: _FileState, chunk: bytes, *, trusted: bool) -> None:
        """Apply the complete lines of ``chunk`` (the file from ``state.loaded`` on)."""
        with collector_paused():
            if state.loaded == 0 and state.lines == 0:
                chunk = chunk[self._load_indexed(sid, state, chunk) :]
            self._load_lines(sid, state, chunk, trusted=trusted)

    def _load_indexed(self, sid: str, state: _FileState, data: bytes) -> int:
        """Load the prefix of ``data`` a trusted index sidecar describes; its length."""
        try:
            raw = self._read_file(index_name(sid), 0)
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

        if not apply_index(self._index, sid, found, parse):
            return 0  # nothing was applied: the lines are read one by one instead
        state.loaded = found.length
        state.lines = state.indexed = len(found.ids)
        state.parents = found.parents
        state.kinds = list(found.kinds)
        if found.tokens is not None and found.encoding is not None:
            # Counts for the bytes the digest vouched for: branch_tokens reads them as its
            # own (each entry's text never changes).
            counted = self._token_cache.setdefault(found.encoding, {})
            for entry_id, kind, count in zip(found.ids, found.kinds, found.tokens, strict=True):
                if kind != "x":
                    counted.setdefault(entry_id, count)
        return found.length

    def _read_lines(self, sid: str, spans: Sequence[Span]) -> builtins.list[SessionEntry]:
        """The messages whose lines lie at ``spans`` of the session's file (``LazyEntries``):
        one open, one ``pread`` per run of adjacent lines."""
        data_name, _ = _file_names(sid)
        out: builtins.list[SessionEntry] = []
        with _io(f"reading {self._where(data_name)}"):
            fd = os.open(data_name, _READ_FLAGS, dir_fd=self._dir_fd)
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
                        out.append(self._parse_kept(entry_id, line))
                    at = run
            finally:
                os.close(fd)
        return out

    def _parse_kept(self, entry_id: str, line: bytes) -> SessionEntry:
        """An entry whose line a load placed without keeping it (``LazyEntries``)."""
        try:
            entry = entry_from_wire(line, where="entry")
            if entry.id == entry_id:
                return entry
            problem = f"holds entry {entry.id!r} where its index has {entry_id!r}"
        except InvalidEntryError as exc:
            problem = str(exc)
        for sid, tree in self._index.trees.items():
            if entry_id in tree.order:
                number = tree.order.index(entry_id) + 1
                raise self._corrupt_line(sid, number, f"{problem} (run 'prism-om check')")
        raise CorruptStoreError(f"entry {entry_id!r}: {problem}", url=self.url)

    def _load_lines(self, sid: str, state: _FileState, chunk: bytes, *, trusted: bool) -> None:
        pos = 0
        if state.open_line:
            if not trusted and not chunk.rstrip(b"\0").strip():
                return  # still only the padding after the unterminated entry
            if not chunk.startswith(b"\n"):
                raise self._corrupt_line(sid, state.lines, "text continues after a complete entry")
            pos, state.loaded, state.open_line = 1, state.loaded + 1, False
        end = chunk.rfind(b"\n") + 1
        if end > pos:
            self._load_complete_lines(sid, state, chunk[pos:end])
            pos = end
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

    def _load_complete_lines(self, sid: str, state: _FileState, lines: bytes) -> None:
        """``_load_line`` for each line of ``lines`` (which ends in a newline), in one loop.

        The same checks in the same order, with the index's one-entry ``add``; a line
        that is not an entry of this session takes ``_load_line``, which raises its error.
        ``state`` moves past each line applied.
        """
        add = self._index.add
        keep, remember = self._lazy().keep_at, self._lazy().remember
        for line in lines.split(b"\n")[:-1]:
            entry = None
            if line and not line.isspace():
                with contextlib.suppress(InvalidEntryError):
                    entry = entry_from_wire(line, where="entry")
            if entry is not None and entry.session_id == sid:
                try:
                    add(entry)
                except StoreRuleError as exc:
                    raise self._corrupt_line(sid, state.lines + 1, str(exc)) from exc
                if entry.kind == "message":
                    keep(entry.id, sid, state.loaded, len(line))
                    remember(entry, len(line))
                state.lines += 1
                state.parents.append(entry.parent_id)
                state.kinds.append(kind_of(entry))
            else:
                self._load_line(sid, state, line)  # a blank line, or this line's error
            state.loaded += len(line) + 1

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
                self._index.add(entry)
            except StoreRuleError as exc:
                raise self._corrupt_line(sid, number, str(exc)) from exc
            if entry.kind == "message":
                self._lazy().keep_at(entry.id, sid, state.loaded, len(line))
                self._lazy().remember(entry, len(line))
            state.parents.append(entry.parent_id)
            state.kinds.append(kind_of(entry))
        state.lines = number

    def _lazy(self) -> LazyEntries:
        entries = self._index.entries
        assert isinstance(entries, LazyEntries)  # set in __init__
        return entries

    def _corrupt_line(self, sid: str, number: int, problem: str) -> CorruptStoreError:
        return CorruptStoreError(
            f"{self._where(sid + DATA_SUFFIX)} line {number}: {problem}", url=self.url
        )

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
        entries = self._lazy()
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

    def _delete_sync(self, sid: str) -> int:
        data_name, _ = _file_names(sid)
        with self._locked(exclusive=True):
            self._finished.clear()
            # Either finishes an interrupted delete of this session (its count is the
            # answer: the retry did the erasing) or of another one.
            self._remove_debris()
            self._refresh()
            self._load_quietly(sid)  # damage is recorded, not raised: a damaged one goes too
            finished = self._finished.pop(sid, None)
            if finished is not None:
                self._after_own_change()
                return finished
            tree = self._index.trees.get(sid)
            if sid in self._damaged:
                count = self._count_lines(data_name)
            elif tree is None or not tree.order:
                raise session_not_found(sid, self.url)
            else:
                count = len(tree.order)
            self._bump_counter(pending=sid, durable=True)
            try:
                with contextlib.suppress(FileNotFoundError):
                    # It names the session's ids: dropped, rebuilt by a later write.
                    os.unlink(IDS_NAME, dir_fd=self._dir_fd)
                self._replace_sidecar(sid, _deleting_body(count))  # the commit
                self._append_manifest(sid, deleted=True)
                self._erase_files(sid)
            finally:
                self._clear_pending()
            self._forget_session(sid)
            self._after_own_change()
            return count

    def _finish_delete(self, sid: str, count: int) -> None:
        """Erase what a delete whose intent is on disk left (under the exclusive lock)."""
        self._bump_counter()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(IDS_NAME, dir_fd=self._dir_fd)
        self._read_manifest()
        if sid in self._manifest:  # the deleter died before it wrote its mark
            self._append_manifest(sid, deleted=True)
        self._erase_files(sid)
        self._forget_session(sid)
        self._deleting.discard(sid)
        self._finished[sid] = count

    def _count_lines(self, data_name: str) -> int:
        """Non-blank lines of a damaged session's data file (0 when it is no file)."""
        try:
            data = self._read_file(data_name, 0)
        except StoreError:
            return 0
        return sum(1 for line in data.split(b"\n") if line.strip(b"\0 \t\r"))

    def _erase_files(self, sid: str) -> None:
        """Zero the data file (a regular file only: links are not followed), unlink it
        and the index sidecar, and the sidecar last, whatever state each is in.

        Every step can be run again: a delete's intent (the sidecar) stays until the end,
        so whoever finishes an interrupted delete runs the whole of this."""
        data_name, sidecar_name = _file_names(sid)
        with _io(f"erasing session {sid!r} from {self._path}"):
            try:
                info = os.stat(data_name, dir_fd=self._dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                info = None
            if info is not None:
                if stat.S_ISREG(info.st_mode):
                    self._zero(data_name)
                os.unlink(data_name, dir_fd=self._dir_fd)
            index = index_name(sid)
            for name in (f".{sidecar_name}.tmp", index, f"{index}.tmp", sidecar_name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=self._dir_fd)
            if self._fsync:
                _fsync_dir(self._path)

    def _zero(self, data_name: str) -> None:
        fd = os.open(data_name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._dir_fd)
        try:
            size, chunk = os.fstat(fd).st_size, bytes(_ZERO_CHUNK)
            for offset in range(0, size, len(chunk)):
                os.pwrite(fd, chunk[: size - offset], offset)
            if self._fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _refresh_for_write(self, sid: str) -> None:
        """Clear debris, know every id of the store (they are store-wide), check ``sid``."""
        self._remove_debris()
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
            self._sweep_debris()
            self._swept = True
        self._backfill_sidecars()

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

    def _sweep_debris(self) -> None:
        """Once per process: cut every session's bytes beyond its committed length.

        ``_remove_debris`` catches a writer that dies now; this catches what older
        crashes left (a power cut loses the record in ``.lock``). Under the exclusive
        lock, bytes past a commit belong to no live writer.
        """
        for name in os.listdir(self._dir_fd):
            ours = (SIDECAR_SUFFIX + ".tmp", ".index.tmp")
            if (name.startswith(".") and name.endswith(ours)) or name == IDS_NAME + ".tmp":
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=self._dir_fd)
        for sid in builtins.list(self._files):
            self._load_quietly(sid)  # hand edits bump no counter: read the sidecar again
            state = self._files.get(sid)
            data_name, sidecar_name = _file_names(sid)
            if (
                state is None
                or not state.has_sidecar
                or (self._data_size(data_name) or 0) <= state.loaded
            ):
                continue
            self._bump_counter()
            if state.loaded == 0 and sid not in self._index.trees:
                os.unlink(data_name, dir_fd=self._dir_fd)  # data first: see _remove_debris
                os.unlink(sidecar_name, dir_fd=self._dir_fd)
                del self._files[sid]
                continue
            self._truncate(data_name, state.loaded)

    def _truncate(self, data_name: str, length: int) -> None:
        fd = os.open(data_name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._dir_fd)
        try:
            os.ftruncate(fd, length)
            if self._fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _backfill_sidecars(self) -> None:
        """Give version 1 sidecars of loaded sessions their summary (once per process).

        Only sidecars that already describe the whole file are rewritten, and without
        fsync: losing one to a power cut leaves the old sidecar or none, and both still
        read correctly.
        """
        for sid, state in self._files.items():
            if state.summarised or not state.has_sidecar or sid not in self._index.trees:
                continue
            data_name, _ = _file_names(sid)
            if self._data_size(data_name) != state.loaded:
                continue
            self._write_sidecar(sid, state.loaded, self._index.leaf(sid), sync=False)
            state.summarised = True

    def _remove_debris(self) -> None:
        """Undo what a writer that died mid-write left behind (under the exclusive lock).

        The record in ``.lock`` names the session; its owner is gone, since a live one
        would still hold the lock this writer holds, so nobody is writing its files.
        """
        sid = self._pending_session()
        if sid is None:
            return
        self._bump_counter()
        data_name, sidecar_name = _file_names(sid)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f".{sidecar_name}.tmp", dir_fd=self._dir_fd)
        try:
            sidecar = self._read_sidecar(sid)
        except StoreError:
            sidecar = None
        if sidecar is not None and sidecar.deleting is not None:
            # A delete_session killed after its commit: finish the erasure.
            self._finish_delete(sid, sidecar.deleting)
            self._clear_pending()
            return
        try:
            size = self._data_size(data_name)
        except StoreError:
            sidecar, size = None, None  # damaged: left for 'check' to report
        if size is not None and sidecar is not None and sidecar.committed < size:
            if sidecar.committed == 0 and sid not in self._index.trees:
                # A session whose first batch never committed: no session at all. The data
                # goes first, so a lockless reader never sees it without its sidecar.
                os.unlink(data_name, dir_fd=self._dir_fd)
                os.unlink(sidecar_name, dir_fd=self._dir_fd)
                self._files.pop(sid, None)
            else:
                self._truncate(data_name, sidecar.committed)
        elif size == 0 and sidecar is None:
            os.unlink(data_name, dir_fd=self._dir_fd)  # created, then killed before a byte
            self._files.pop(sid, None)
        elif size and sidecar is not None and sidecar.committed and self._zeroed(data_name):
            # An older prism-om's delete_session, killed once it had begun zeroing (maybe
            # part way): finish it, zeroing all of it.
            self._erase_files(sid)
            self._forget_session(sid)
        elif size is None and sidecar is not None:
            # An older prism-om's delete_session, killed between its two unlinks.
            os.unlink(sidecar_name, dir_fd=self._dir_fd)
            self._forget_session(sid)
        self._clear_pending()

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
