"""The files of a JSONL store: their names, their sidecars' shape, and raw I/O on them.

Everything here works on one directory descriptor and bytes; the protocol that uses them
(appends, loads, repair, delete) is in ``store``, ``repair`` and ``deletion``. See
``store``'s docstring for the layout.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ...entries import SessionEntry, validate_session_id
from ...errors import (
    InvalidSessionIdError,
    StoreBusyError,
    StoreError,
)
from ..base import (
    SessionSummary,
)
from ..segment_index.index import TreeIndex, comparable_time

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
