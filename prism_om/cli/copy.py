"""``prism-om copy --from URL --to URL``: every session of one store into another.

Each session's entries go over in append order (every branch), in batches through the
target's ``append_many``, so the target builds its own fold rows as it would for any
append; then its persisted leaf is set with ``checkout``. The copy is idempotent: a
session the target already holds whole is skipped, one holding a prefix of the source's
entries (an interrupted copy) is completed from where it stops, and one holding anything
else is refused with ``CopyConflictError``. At the end every copied session's counts are
compared (entries, leaves, leaf, ledger observations and reflections); a difference is a
``CopyVerificationError`` (exit 1) naming it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..entries import SessionEntry
from ..errors import CopyConflictError, CopyVerificationError
from ..stores import SessionStore
from .common import CliUsageError, open_cli_store
from .output import console, error_console, print_json

__all__ = ["BATCH", "SessionCopy", "cmd_copy", "copy_sessions", "verify_copy"]

BATCH = 500
"""Entries per ``append_many`` of the target: one transaction each."""


@dataclass
class SessionCopy:
    """What the copy did to one session: ``copied``, ``completed`` or ``skipped``."""

    session_id: str
    status: str
    entries: int
    appended: int
    leaf: str | None
    mismatches: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "status": self.status,
            "entries": self.entries,
            "appended": self.appended,
            "leaf": self.leaf,
            "mismatches": self.mismatches,
        }


def _present_prefix(session_id: str, source: list[SessionEntry], target: list[SessionEntry]) -> int:
    """How many of the source's entries the target holds already, as a prefix; else refuse."""
    if len(target) > len(source):
        raise CopyConflictError(
            f"session {session_id!r} has {len(target)} entries at the target, "
            f"more than the {len(source)} of the source: refusing to copy it",
            session_id=session_id,
        )
    for index, (theirs, ours) in enumerate(zip(target, source, strict=False)):
        if theirs != ours:
            raise CopyConflictError(
                f"session {session_id!r} differs at the target from entry {index} "
                f"({theirs.id!r} there, {ours.id!r} in the source): refusing to copy it",
                session_id=session_id,
                entry_id=ours.id,
            )
    return len(target)


async def copy_sessions(
    source: SessionStore,
    target: SessionStore,
    session_ids: list[str],
    on_progress: Any = None,
    on_total: Any = None,
) -> list[SessionCopy]:
    """Copy the sessions; ``on_total(to_append)`` once planned, ``on_progress(n)`` per batch."""
    plans: list[tuple[str, list[SessionEntry], int]] = []
    # Every session is checked before anything is written: a conflict writes nothing.
    for session_id in session_ids:
        entries = await source.list(session_id)
        try:
            present = _present_prefix(session_id, entries, await target.list(session_id))
        except CopyConflictError as exc:
            exc.add_context(url=target.url)
            raise
        plans.append((session_id, entries, present))
    if on_total is not None:
        on_total(sum(len(entries) - present for _, entries, present in plans))
    done: list[SessionCopy] = []
    for session_id, entries, present in plans:
        rest = entries[present:]
        for start in range(0, len(rest), BATCH):
            batch = rest[start : start + BATCH]
            await target.append_many(batch)
            if on_progress is not None:
                on_progress(len(batch))
        leaf = await source.leaf(session_id)
        moved = False
        if leaf is not None and await target.leaf(session_id) != leaf:
            await target.checkout(session_id, leaf)
            moved = True
        if present == 0 and rest:
            status = "copied"
        elif rest or moved:
            status = "completed"
        else:
            status = "skipped"
        done.append(SessionCopy(session_id, status, len(entries), len(rest), leaf))
    return done


async def _counts(store: SessionStore, session_id: str) -> dict[str, Any]:
    ledger = await store.ledger(session_id)
    return {
        "entries": len(await store.list(session_id)),
        "leaves": await store.leaves(session_id),
        "leaf": await store.leaf(session_id),
        "observations": len(ledger.observations),
        "reflections": len(ledger.reflections),
    }


async def verify_copy(
    source: SessionStore, target: SessionStore, copies: list[SessionCopy]
) -> list[str]:
    """Compare each session's counts at both ends; the differences, one line each."""
    problems: list[str] = []
    for copy in copies:
        ours = await _counts(source, copy.session_id)
        theirs = await _counts(target, copy.session_id)
        for name, value in ours.items():
            if theirs[name] != value:
                shown = len(value) if name == "leaves" else value
                other = len(theirs[name]) if name == "leaves" else theirs[name]
                line = f"{name}: source {shown!r}, target {other!r}"
                copy.mismatches.append(line)
                problems.append(f"session {copy.session_id!r} {line}")
    return problems


async def cmd_copy(args: argparse.Namespace) -> None:
    if args.source == args.target:
        raise CliUsageError("--from and --to name the same store")
    err = error_console()
    async with open_cli_store(args.source) as source:
        known = await source.sessions()
        wanted: list[str] = list(dict.fromkeys(args.session or known))
        missing = [s for s in wanted if s not in set(known)]
        if missing:
            raise CliUsageError(
                f"no session {missing[0]!r} in {source.url}", session_id=missing[0], url=source.url
            )
        async with open_cli_store(args.target, create=True) as target:
            bar = Progress(
                TextColumn("copying"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
                disable=args.json or not err.is_terminal,
            )
            task = bar.add_task("entries", total=None)
            with bar:
                copies = await copy_sessions(
                    source,
                    target,
                    wanted,
                    on_progress=lambda n: bar.advance(task, n),
                    on_total=lambda n: bar.update(task, total=n),
                )
            problems = await verify_copy(source, target, copies)
            urls = (source.url, target.url)
    if args.json:
        print_json(
            {
                "from": urls[0],
                "to": urls[1],
                "sessions": [c.as_json() for c in copies],
                "appended": sum(c.appended for c in copies),
                "verified": not problems,
            }
        )
    else:
        out = console()
        for c in copies:
            out.print(f"{c.status:9} {c.session_id}: {c.appended} of {c.entries} entries appended")
        appended = sum(c.appended for c in copies)
        out.print(f"{len(copies)} sessions, {appended} entries appended: {urls[0]} -> {urls[1]}")
    if problems:
        raise CopyVerificationError("copy verification failed: " + "; ".join(problems), url=urls[1])
