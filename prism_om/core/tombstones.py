"""Tombstone records: their one shape, checked alike where they are written and read.

A revocation is recorded as custom entries of type ``prism.tombstones.recorded`` in a
session of its own, ``tombstones.<scope>``, with ``data``::

    {"type": "prism.tombstones.recorded", "scope": "<scope>",
     "reason": "revoked" | "deleted" | "corrected", "ids": ["<entry or memory id>", ...]}

``scope`` is the scope of the session the record is in (itself a valid session-id name,
so that ``tombstones.<scope>`` is one); ``ids`` is a list of at most
``MAX_TOMBSTONE_IDS`` ids of 1-256 characters. A tombstone session holds nothing else, and
the record type lives nowhere else (it would revoke nothing there).

* **write**: every adapter's append runs ``check_tombstone_entry`` (from
  ``check_batch_shape``), so the deletion propagator, an import into a ``tombstones.<scope>``
  session and any hand-made append are refused alike, with ``TombstoneRecordError``
  naming the entry and the field, before anything is stored;
* **read**: ``tombstone_record_problem`` says why a stored entry is not such a record
  (a store written by hand, or by a version without this rule); the reader skips it with a
  ``MalformedTombstoneWarning`` naming its entry id, and every read keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from ..entries import SessionEntry, validate_session_id
from ..errors import InvalidSessionIdError, MalformedTombstoneWarning, TombstoneRecordError
from .records import ENTRY_ID_MAX_CHARS

__all__ = [
    "MAX_TOMBSTONE_IDS",
    "TOMBSTONES_RECORDED",
    "TOMBSTONE_REASONS",
    "TOMBSTONE_SESSION_PREFIX",
    "WITHHOLDING_REASONS",
    "MalformedTombstoneWarning",
    "TombstoneReason",
    "TombstoneRecord",
    "check_tombstone_entry",
    "parse_tombstone_record",
    "tombstone_record_problem",
    "tombstone_scope",
]

TOMBSTONES_RECORDED: Final = "prism.tombstones.recorded"
TOMBSTONE_SESSION_PREFIX: Final = "tombstones."
TombstoneReason = Literal["revoked", "deleted", "corrected"]
TOMBSTONE_REASONS: Final[tuple[str, ...]] = get_args(TombstoneReason)
WITHHOLDING_REASONS: Final = frozenset({"revoked", "deleted"})
MAX_TOMBSTONE_IDS: Final = 4096
"""One record names at most this many ids, so a record stays a sane entry size."""


@dataclass(frozen=True)
class TombstoneRecord:
    """One well-formed tombstone record."""

    entry_id: str
    scope: str
    reason: TombstoneReason
    ids: tuple[str, ...]


def tombstone_scope(session_id: str) -> str | None:
    """The scope of tombstone session ``session_id``; None when it is no tombstone session
    or its scope is no valid scope name (nothing can be read or written for it)."""
    if not session_id.startswith(TOMBSTONE_SESSION_PREFIX):
        return None
    scope = session_id[len(TOMBSTONE_SESSION_PREFIX) :]
    try:
        return validate_session_id(scope)
    except InvalidSessionIdError:
        return None


def tombstone_record_problem(entry: SessionEntry) -> tuple[str, str] | None:
    """``(field, why)`` when ``entry`` breaks the tombstone rule of its session, else None.

    The rule applies to every entry of a ``tombstones.<scope>`` session and to every
    ``prism.tombstones.recorded`` record; any other entry passes.
    """
    in_tombstones = entry.session_id.startswith(TOMBSTONE_SESSION_PREFIX)
    is_record = entry.kind == "custom" and entry.custom_type == TOMBSTONES_RECORDED
    if not in_tombstones and not is_record:
        return None
    if not in_tombstones:
        return (
            "sessionId",
            f"a {TOMBSTONES_RECORDED} record belongs in a {TOMBSTONE_SESSION_PREFIX}<scope> "
            f"session, not in {entry.session_id!r} (read nowhere else, it would revoke nothing)",
        )
    scope = tombstone_scope(entry.session_id)
    if scope is None:
        return (
            "sessionId",
            f"{entry.session_id!r} names no valid scope after {TOMBSTONE_SESSION_PREFIX!r} "
            "(1-128 characters of [A-Za-z0-9._:-], starting with a letter or digit)",
        )
    if not is_record:
        what = entry.custom_type if entry.kind == "custom" else entry.kind
        return (
            "kind",
            f"session {entry.session_id!r} holds only {TOMBSTONES_RECORDED} records, "
            f"not a {what!s:.80} entry",
        )
    data: dict[str, Any] = entry.data or {}
    if data.get("scope") != scope:
        return (
            "data.scope",
            f"must be {scope!r}, the scope of its session, got {_shown(data.get('scope'))}",
        )
    reason = data.get("reason")
    if not isinstance(reason, str) or reason not in TOMBSTONE_REASONS:
        return (
            "data.reason",
            f"must be one of {', '.join(TOMBSTONE_REASONS)}, got {_shown(reason)}",
        )
    ids = data.get("ids")
    if not isinstance(ids, list):
        return ("data.ids", f"must be a list of ids, got {_shown(ids)}")
    if len(ids) > MAX_TOMBSTONE_IDS:
        return ("data.ids", f"holds {len(ids)} ids, above the cap of {MAX_TOMBSTONE_IDS}")
    for index, item in enumerate(ids):
        if not isinstance(item, str) or not item or len(item) > ENTRY_ID_MAX_CHARS:
            return (
                f"data.ids[{index}]",
                f"must be an entry or memory id of 1-{ENTRY_ID_MAX_CHARS} characters, "
                f"got {_shown(item)}",
            )
    return None


def parse_tombstone_record(entry: SessionEntry) -> TombstoneRecord:
    """The record ``entry`` holds; ``TombstoneRecordError`` when it breaks the rule.

    Only for entries of a tombstone session: any other entry is no record at all.
    """
    check_tombstone_entry(entry)
    if not entry.session_id.startswith(TOMBSTONE_SESSION_PREFIX):
        raise TombstoneRecordError(
            f"entry {entry.id!r} of session {entry.session_id!r} is not a tombstone record",
            field="sessionId",
            entry_id=entry.id,
            session_id=entry.session_id,
        )
    data = entry.data or {}
    return TombstoneRecord(entry.id, data["scope"], data["reason"], tuple(data["ids"]))


def check_tombstone_entry(entry: SessionEntry) -> None:
    """The append rule: raise ``TombstoneRecordError`` when ``entry`` breaks it."""
    problem = tombstone_record_problem(entry)
    if problem is None:
        return
    field, why = problem
    raise TombstoneRecordError(
        f"entry {entry.id!r} of session {entry.session_id!r}: {field} {why}",
        field=field,
        entry_id=entry.id,
        session_id=entry.session_id,
    )


def _shown(value: object) -> str:
    """A value in a message, bounded: a hand-written record may hold anything (a container
    is named by its type, never printed: it may be huge or nested past any repr)."""
    if value is None or isinstance(value, str | int | float | bool):
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    return f"a {type(value).__name__}"
