"""``import --append``: a transcript's new messages continue an existing session.

A nightly sync imports the same, growing transcript again and again, so an append adds
only what the session does not hold yet. A message is already there when the session
holds its id with the same role and text (an import's ids are derived from the session
and the record's place in the file: ``build.derive_entry_id``, so a file that only grew at
its end gives its old records their old ids, undated ones included), or a message on the
current branch with the same role, text and time (the content/time key, which finds a
message whatever line it moved to). A new message whose place-derived id another message
already took (another file's line 1) is given an id derived from its content and time.

What is appended: the messages on the file's own branch (root to its last entry) that are
new, in file order, each the child of the one before, the first a child of the session's
leaf. Custom entries and compactions of the file are not appended: they name entries of
the file's own tree. A new message dated before the leaf would break the branch's time
order, so it is refused (``ImportOrderError`` naming it) unless ``allow_earlier``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.timestamps import utc_timestamp
from ..entries import SessionEntry, entry_from_wire, entry_text
from ..errors import ImportOrderError
from ..stores.base import SessionStore
from .build import derive_entry_id

__all__ = ["AppendPlan", "plan_append"]

_EXCERPT = 60


@dataclass(frozen=True)
class AppendPlan:
    """The entries an append adds (relinked after the leaf) and how many it skipped."""

    entries: list[SessionEntry]
    skipped: int
    leaf_id: str | None


def _key(entry: SessionEntry) -> tuple[str, str, str] | None:
    if entry.kind != "message" or entry.message is None:
        return None
    return (entry.message.role, entry_text(entry), utc_timestamp(entry.timestamp) or "")


def _file_branch(entries: Sequence[SessionEntry]) -> list[SessionEntry]:
    """The file's entries from its root to its last entry (its leaf), root first."""
    if not entries:
        return []
    by_id = {e.id: e for e in entries}
    path: list[SessionEntry] = []
    current: SessionEntry | None = entries[-1]
    while current is not None:
        path.append(current)
        current = by_id.get(current.parent_id) if current.parent_id else None
    return path[::-1]


def _rekeyed(entry: SessionEntry, session_id: str) -> SessionEntry:
    """The message under an id derived from its role, text and time, not its place."""
    key = _key(entry)
    digest = hashlib.sha256(repr(key).encode()).hexdigest()
    wire = entry.to_wire()
    wire["id"] = derive_entry_id(session_id, f"append:{digest}")
    return entry_from_wire(wire, where="entry")


async def plan_append(
    store: SessionStore,
    session_id: str,
    entries: Sequence[SessionEntry],
    *,
    path: str,
    locations: dict[str, tuple[int | None, int | None]],
    allow_earlier: bool = False,
) -> AppendPlan:
    """What appending ``entries`` (one import's parse) to ``session_id`` adds.

    ``locations`` gives each entry's (line, index) in the file for the error message.
    """
    leaf = await store.leaf(session_id)
    branch = await store.entries(session_id) if leaf is not None else []
    keys = {k for k in map(_key, branch) if k is not None}
    messages = [e for e in _file_branch(entries) if e.kind == "message"]
    held = await store.get_many([e.id for e in messages])
    new: list[SessionEntry] = []
    origin: dict[str, str] = {}  # a re-keyed message's id -> its id in the parse
    for entry in messages:
        if _key(entry) in keys:
            continue
        taken = held.get(entry.id)
        if taken is None:
            new.append(entry)
        elif _key(taken) is None or _key(taken)[:2] != _key(entry)[:2]:  # type: ignore[index]
            rekeyed = _rekeyed(entry, session_id)
            origin[rekeyed.id] = entry.id
            new.append(rekeyed)
    # A content-derived id held already is that very message (same role, text and time).
    again = await store.get_many([e.id for e in new])
    new = [e for e in new if e.id not in again]
    leaf_entry = branch[-1] if branch else None
    leaf_time = utc_timestamp(leaf_entry.timestamp) if leaf_entry is not None else None
    if leaf_entry is not None and leaf_time is not None and not allow_earlier:
        for entry in new:
            when = utc_timestamp(entry.timestamp) or ""
            if when < leaf_time:
                role = entry.message.role if entry.message is not None else entry.kind
                text = " ".join(entry_text(entry).split())[:_EXCERPT]
                line, index = locations.get(origin.get(entry.id, entry.id), (None, None))
                raise ImportOrderError(
                    path,
                    f"{role} message {text!r} is dated {when}, before the leaf "
                    f"{leaf_entry.id} of session {session_id!r} ({leaf_time}); an append "
                    "adds only later messages (pass --allow-earlier to append it anyway)",
                    leaf_id=leaf_entry.id,
                    leaf_time=leaf_time,
                    line=line,
                    index=index,
                    entry_id=entry.id,
                    session_id=session_id,
                )
    linked: list[SessionEntry] = []
    parent = leaf
    for entry in new:
        wire = entry.to_wire()
        wire["parentId"] = parent
        relinked = entry_from_wire(wire, where="entry")
        linked.append(relinked)
        parent = relinked.id
    return AppendPlan(linked, len(messages) - len(new), leaf)
