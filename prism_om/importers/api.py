"""Parsing a transcript file into a plan, and importing a plan in one all-or-nothing batch.

Session naming. Without an explicit ``session_id`` the new session is named after the file:
its stem with every character outside ``[A-Za-z0-9._:-]`` turned into ``-`` (at most 100
characters), a ``-``, and the first 8 hex digits of the SHA-256 of the file's bytes, e.g.
``chat-export-3f9c01ab``. When the store already has that session (the same file imported
before), ``-2``, ``-3``, ... is added. An explicit ``session_id`` that the store already has
is refused with ``SessionExistsError``, unless ``append=True``: then the file's new
messages continue that session after its leaf (``prism_om.importers.append`` says which
are new and how times are checked), so importing the same growing transcript every night
adds only what it gained.

Memory records. A native session file's ``om.*`` records cite the origin session's entry
ids, which an import replaces; they cannot stay memory. Rather than lose them without a
word, an import of such a file is refused (``ImportFormatError`` saying how many and what
to do: ``prism-om copy`` moves a session with its memory) unless ``drop_memory=True``,
which keeps them as ``import.om-record`` history entries and lets the new session's own
workers build its memory.

Times. Records without a time of their own are dated ``interval`` seconds apart (default
1) from ``start_time`` (an ISO 8601 string or a datetime; naive is UTC), else around the
file's own times, else back from the import time; ``times`` (on the plan and the result)
says which. ``prism_om.importers.times`` has the rules.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..entries import SessionEntry, validate_session_id
from ..stores.base import SessionStore
from .build import EntryFactory, Progress, TimeOptions
from .detect import Format, detect_format, normalise_format
from .errors import ImportFormatError, SessionExistsError
from .native import OM_RECORD_TYPE, parse_native
from .openai_chat import parse_openai
from .pi_session import parse_pi, pi_version
from .source import Source, read_source
from .times import DEFAULT_INTERVAL, ImportTimes, parse_start_time, validate_interval

__all__ = [
    "ImportPlan",
    "ImportResult",
    "check_transcript_file",
    "memory_refusal",
    "default_session_id",
    "import_conversation",
    "parse_conversation",
    "parse_conversation_bytes",
]

_PARSERS: dict[Format, Callable[[Source, EntryFactory], list[SessionEntry]]] = {
    "openai": parse_openai,
    "pi": parse_pi,
    "native": parse_native,
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]+")
_STEM_CHARS = 100


@dataclass(frozen=True)
class ImportPlan:
    """What an import would append, computed without touching any store.

    ``entries`` are in append order (every parent before its children); the last one
    becomes the session's leaf. ``record_count`` is the number of records read from the
    file: every record yields exactly one entry, and a pi file without a header gets one
    synthetic root on top.
    """

    file: str
    format: Format
    label: str
    session_id: str
    entries: list[SessionEntry]
    record_count: int
    times: ImportTimes
    """How the records were dated: their own times, and the fallback for the rest."""
    locations: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    """Each entry's (line, index) in the file, by entry id."""

    @property
    def leaf_id(self) -> str:
        return self.entries[-1].id

    @property
    def memory_records(self) -> list[SessionEntry]:
        """The origin session's ``om.*`` records, kept as ``import.om-record`` entries."""
        return [e for e in self.entries if (e.data or {}).get("type") == OM_RECORD_TYPE]


@dataclass(frozen=True)
class ImportResult:
    """What an import appended."""

    file: str
    format: Format
    label: str
    session_id: str
    entry_count: int
    leaf_id: str
    times: ImportTimes
    """How the entries were dated; ``times.describe()`` says it in a sentence."""
    appended: bool = False
    """True when the entries continued an existing session (``append=True``)."""
    skipped: int = 0
    """Messages of the file an append left out: the session held them already."""


def default_session_id(file_name: str, digest: str) -> str:
    """The session id an import of ``file_name`` with content hash ``digest`` starts from."""
    stem = _UNSAFE.sub("-", Path(file_name).stem)
    stem = re.sub(r"\.{2,}", ".", stem)
    stem = re.sub(r"^[^A-Za-z0-9]+", "", stem)[:_STEM_CHARS].rstrip(".-:")
    return f"{stem or 'import'}-{digest[:8]}"


def _choose_session_id(source: Source, requested: str | None, existing: Collection[str]) -> str:
    if requested is not None:
        validate_session_id(requested)
        if requested in existing:
            raise SessionExistsError(
                f"session {requested!r} already exists in the store; an import never adds "
                "to an existing session: name another session, or leave the name out to get "
                "a fresh one",
                session_id=requested,
            )
        return requested
    base = default_session_id(source.name, source.digest)
    candidate, suffix = base, 2
    while candidate in existing:
        candidate, suffix = f"{base}-{suffix}", suffix + 1
    return validate_session_id(candidate)


def _label(fmt: Format, source: Source) -> str:
    if fmt == "pi":
        return f"pi v{pi_version(source)}"
    if fmt == "openai":
        return f"openai {source.layout}"
    return "native"


def parse_conversation_bytes(
    data: bytes,
    *,
    name: str,
    format: str | None = None,
    session_id: str | None = None,
    existing_sessions: Collection[str] = (),
    progress: Progress | None = None,
    start_time: datetime | str | None = None,
    interval: float = DEFAULT_INTERVAL,
) -> ImportPlan:
    """``parse_conversation`` for content already in memory; ``name`` is its file name."""
    options = TimeOptions(parse_start_time(start_time), validate_interval(interval))
    source = read_source(data, name)
    fmt = normalise_format(format) if format is not None else detect_format(source)
    target = _choose_session_id(source, session_id, existing_sessions)
    factory = EntryFactory(source, target, progress, options)
    entries = _PARSERS[fmt](source, factory)
    jsonl = source.layout == "jsonl"
    return ImportPlan(
        file=name,
        format=fmt,
        label=_label(fmt, source),
        session_id=target,
        entries=entries,
        record_count=len(source.records),
        times=factory.times or _own_times(entries, options.interval),
        locations={
            entry_id: (pos, None) if jsonl else (None, pos)
            for entry_id, pos in factory.positions.items()
        },
    )


def _own_times(entries: list[SessionEntry], interval: float) -> ImportTimes:
    # Native files carry every entry's time (the wire format requires one).
    return ImportTimes(own=len(entries), filled=0, fallback="none", interval=interval)


def parse_conversation(
    path: str | Path,
    *,
    format: str | None = None,
    session_id: str | None = None,
    existing_sessions: Collection[str] = (),
    progress: Progress | None = None,
    start_time: datetime | str | None = None,
    interval: float = DEFAULT_INTERVAL,
) -> ImportPlan:
    """Read a transcript file and return the entries an import would append.

    ``format`` is ``"openai"``, ``"pi"`` or ``"native"``; None detects it. ``session_id``
    names the new session; None derives one from the file (see the module docstring),
    avoiding the names in ``existing_sessions``. ``progress(done, total)`` is called at
    most about 100 times. ``start_time`` and ``interval`` date the records that carry no
    time (module docstring, "Times"). Malformed input raises ``ImportFormatError`` naming
    the file, the line (JSON lines) or index (JSON array) and the reason (a bad time value:
    ``ImportTimeError``, naming the field too); a bad ``start_time`` or ``interval`` raises
    ``InvalidInputError``. Nothing is written.
    """
    file = check_transcript_file(path)
    return parse_conversation_bytes(
        file.read_bytes(),
        name=str(path),
        format=format,
        session_id=session_id,
        existing_sessions=existing_sessions,
        progress=progress,
        start_time=start_time,
        interval=interval,
    )


async def import_conversation(
    store: SessionStore,
    path: str | Path,
    *,
    format: str | None = None,
    session_id: str | None = None,
    progress: Progress | None = None,
    start_time: datetime | str | None = None,
    interval: float = DEFAULT_INTERVAL,
    append: bool = False,
    allow_earlier: bool = False,
    drop_memory: bool = False,
) -> ImportResult:
    """Parse a transcript file and append it to ``store`` as a new session, in one batch.

    The batch is all or nothing: a malformed file (``ImportFormatError``), an existing
    explicit ``session_id`` (``SessionExistsError``) or a store rule broken by a concurrent
    writer leaves the store as it was. ``progress`` runs on the event loop's thread.
    ``start_time`` and ``interval`` date the records without a time; ``result.times``
    says how they were dated (``parse_conversation``).

    ``append=True`` (with ``session_id``) continues that session when it exists: only the
    file's messages it does not hold yet are added, after its leaf, and one dated before
    the leaf raises ``ImportOrderError`` unless ``allow_earlier`` (module docstring). A
    native file holding memory records is refused unless ``drop_memory`` (module
    docstring, "Memory records").
    """
    from ..errors import InvalidInputError

    # A bad option is refused before the file is read or the store is asked anything.
    parse_start_time(start_time)
    validate_interval(interval)
    if append and session_id is None:
        raise InvalidInputError("an append needs the session to continue: pass session_id")
    if allow_earlier and not append:
        raise InvalidInputError("allow_earlier applies to an append only")
    file = check_transcript_file(path)
    data = await asyncio.to_thread(file.read_bytes)
    existing = set(await store.sessions())
    continuing = append and session_id in existing
    if continuing:
        existing.discard(str(session_id))  # the plan's ids are this session's
        if start_time is None:
            # Records without a time continue from the leaf: dated back from the import
            # time they could land before it (an append the same second as the import).
            start_time = await _leaf_time(store, str(session_id))
    try:
        plan = parse_conversation_bytes(
            data,
            name=str(path),
            format=format,
            session_id=session_id,
            existing_sessions=existing,
            progress=progress,
            start_time=start_time,
            interval=interval,
        )
    except SessionExistsError as exc:
        exc.add_context(url=store.url)
        raise
    if plan.memory_records and not drop_memory:
        raise memory_refusal(plan)
    if continuing:
        from .append import plan_append

        added = await plan_append(
            store,
            plan.session_id,
            plan.entries,
            path=plan.file,
            locations=plan.locations,
            allow_earlier=allow_earlier,
        )
        if added.entries:
            await store.append_many(added.entries)
        leaf = added.entries[-1].id if added.entries else added.leaf_id
        return ImportResult(
            file=plan.file,
            format=plan.format,
            label=plan.label,
            session_id=plan.session_id,
            entry_count=len(added.entries),
            leaf_id=leaf or "",
            times=plan.times,
            appended=True,
            skipped=added.skipped,
        )
    await store.append_many(plan.entries)
    return ImportResult(
        file=plan.file,
        format=plan.format,
        label=plan.label,
        session_id=plan.session_id,
        entry_count=len(plan.entries),
        leaf_id=plan.leaf_id,
        times=plan.times,
    )


async def _leaf_time(store: SessionStore, session_id: str) -> str | None:
    leaf = await store.leaf(session_id)
    entry = await store.get(leaf) if leaf is not None else None
    return entry.timestamp if entry is not None else None


def memory_refusal(plan: ImportPlan) -> ImportFormatError:
    """Why a native file's memory cannot come along, and the two ways forward."""
    records = plan.memory_records
    kinds = sorted({str((e.data or {}).get("originalType")) for e in records})
    return ImportFormatError(
        plan.file,
        f"holds {len(records)} memory record(s) ({', '.join(kinds)}) that cite the origin "
        "session's entry ids, which an import replaces, so they cannot stay memory here; "
        "'prism-om copy --from jsonl:DIR --to URL --session ID' moves the session with "
        "its memory, or pass --drop-memory (drop_memory=True) to import its messages and "
        "rebuild memory with 'prism-om observe'",
        session_id=plan.session_id,
    )


_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
)


def check_transcript_file(path: str | Path) -> Path:
    """``path`` when it names an existing regular file (symlinks followed).

    Anything else raises ``ImportFormatError`` saying what it is: reading ``/dev/zero`` or
    a pipe would never end, and "no such file" for a directory would be untrue.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ImportFormatError(str(path), "no such file") from None
    except OSError as exc:
        raise ImportFormatError(str(path), f"cannot read it: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        what = next(
            (kind for test, kind in _NOT_REGULAR if test(mode)),
            "something other than a regular file",
        )
        raise ImportFormatError(str(path), f"is {what}, not a transcript file")
    return Path(path)
