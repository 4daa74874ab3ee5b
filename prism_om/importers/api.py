"""Parsing a transcript file into a plan, and importing a plan in one all-or-nothing batch.

Session naming. Without an explicit ``session_id`` the new session is named after the file:
its stem with every character outside ``[A-Za-z0-9._:-]`` turned into ``-`` (at most 100
characters), a ``-``, and the first 8 hex digits of the SHA-256 of the file's bytes, e.g.
``chat-export-3f9c01ab``. When the store already has that session (the same file imported
before), ``-2``, ``-3``, ... is added. An explicit ``session_id`` that the store already has
is refused with ``SessionExistsError``: an import never adds to an existing session.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from ..entries import SessionEntry, validate_session_id
from ..stores.base import SessionStore
from .build import EntryFactory, Progress
from .detect import Format, detect_format, normalise_format
from .errors import ImportFormatError, SessionExistsError
from .native import parse_native
from .openai_chat import parse_openai
from .pi_session import parse_pi, pi_version
from .source import Source, read_source

__all__ = [
    "ImportPlan",
    "ImportResult",
    "check_transcript_file",
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

    @property
    def leaf_id(self) -> str:
        return self.entries[-1].id


@dataclass(frozen=True)
class ImportResult:
    """What an import appended."""

    file: str
    format: Format
    label: str
    session_id: str
    entry_count: int
    leaf_id: str


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
) -> ImportPlan:
    """``parse_conversation`` for content already in memory; ``name`` is its file name."""
    source = read_source(data, name)
    fmt = normalise_format(format) if format is not None else detect_format(source)
    target = _choose_session_id(source, session_id, existing_sessions)
    entries = _PARSERS[fmt](source, EntryFactory(source, target, progress))
    return ImportPlan(
        file=name,
        format=fmt,
        label=_label(fmt, source),
        session_id=target,
        entries=entries,
        record_count=len(source.records),
    )


def parse_conversation(
    path: str | Path,
    *,
    format: str | None = None,
    session_id: str | None = None,
    existing_sessions: Collection[str] = (),
    progress: Progress | None = None,
) -> ImportPlan:
    """Read a transcript file and return the entries an import would append.

    ``format`` is ``"openai"``, ``"pi"`` or ``"native"``; None detects it. ``session_id``
    names the new session; None derives one from the file (see the module docstring),
    avoiding the names in ``existing_sessions``. ``progress(done, total)`` is called at
    most about 100 times. Malformed input raises ``ImportFormatError`` naming the file,
    the line (JSON lines) or index (JSON array) and the reason. Nothing is written.
    """
    file = check_transcript_file(path)
    return parse_conversation_bytes(
        file.read_bytes(),
        name=str(path),
        format=format,
        session_id=session_id,
        existing_sessions=existing_sessions,
        progress=progress,
    )


async def import_conversation(
    store: SessionStore,
    path: str | Path,
    *,
    format: str | None = None,
    session_id: str | None = None,
    progress: Progress | None = None,
) -> ImportResult:
    """Parse a transcript file and append it to ``store`` as a new session, in one batch.

    The batch is all or nothing: a malformed file (``ImportFormatError``), an existing
    explicit ``session_id`` (``SessionExistsError``) or a store rule broken by a concurrent
    writer leaves the store as it was. ``progress`` runs on the event loop's thread.
    """
    file = check_transcript_file(path)
    data = await asyncio.to_thread(file.read_bytes)
    existing = set(await store.sessions())
    try:
        plan = parse_conversation_bytes(
            data,
            name=str(path),
            format=format,
            session_id=session_id,
            existing_sessions=existing,
            progress=progress,
        )
    except SessionExistsError as exc:
        exc.add_context(url=store.url)
        raise
    await store.append_many(plan.entries)
    return ImportResult(
        file=plan.file,
        format=plan.format,
        label=plan.label,
        session_id=plan.session_id,
        entry_count=len(plan.entries),
        leaf_id=plan.leaf_id,
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
