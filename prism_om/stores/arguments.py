"""The argument rules of the ``SessionStore`` methods, in one place for every adapter.

Each adapter calls these at a method's entry, before it reads or writes anything (the
in-memory, JSONL, SQLite and PostgreSQL adapters, ``StoreBase``'s derived reads, and an
outside adapter built on ``StoreBase``), so a bad argument gets the same typed error from
every store, with the argument named in the message and in the error's ``field``:

* ``session_id``: ``prism_om.entries.validate_session_id``, else
  ``InvalidSessionIdError``;
* an id (``entry_id`` of ``get``, ``checkout`` and ``is_on_branch``, ``cursor``): a
  string of 1-256 characters with no NUL and no lone surrogate
  (``prism_om.entries.id_problem``), else ``InvalidIdError``;
* ``leaf_id``, ``after_id``: None or an id; ``expected_memory_head``: also
  ``ANY_MEMORY_HEAD``; else ``InvalidIdError``;
* ``entry_ids``, ``memory_ids``: an iterable of ids of any length (not None, not one
  string), else ``InvalidInputError``; an item that is not an id: ``InvalidIdError``
  naming it (``memory_ids[3]``);
* ``count`` of ``recent_messages``: an int from 0 to 2**53 - 1 (not a bool, not a
  float), else ``InvalidInputError``;
* ``limit`` of ``page_messages``: an int from 1 to 100 (not a bool), else
  ``InvalidInputError`` (``PageTooLargeError`` above 100); ``direction``: ``"forward"``
  or ``"backward"``, else ``InvalidInputError``;
* ``entries`` of ``append_many`` and ``append_at_leaf``: a sequence of ``SessionEntry``
  (not None, not one entry, a string or a mapping), else ``InvalidEntryError``; the
  entries themselves are ``base.check_batch_shape``'s.

An id that no entry can have is refused rather than "not found", so that no store sends
it to its storage: PostgreSQL cannot hold a NUL in a text value, and no UTF-8 text can
hold a lone surrogate. Messages show a bad value by its type, or a string cut short,
never its whole ``repr`` (which could be huge, or recurse without end).
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..core.limits import MAX_SAFE_INTEGER, resolve_page_limit
from ..core.shown import shown
from ..entries import ENTRY_ID_MAX_CHARS, SessionEntry, find_lone_surrogate, id_problem
from ..errors import InvalidEntryError, InvalidIdError, InvalidInputError

__all__ = [
    "ANY_MEMORY_HEAD",
    "AnyMemoryHead",
    "check_batch_argument",
    "check_count",
    "check_custom_type",
    "check_entry_id",
    "check_expected_memory_head",
    "check_id_list",
    "check_leaf_id",
    "check_page_args",
]


class AnyMemoryHead(enum.Enum):
    """The type of ``ANY_MEMORY_HEAD``."""

    ANY = "any"


ANY_MEMORY_HEAD: Final = AnyMemoryHead.ANY
"""``append_at_leaf(expected_memory_head=...)`` default: append whatever the head is."""


def check_entry_id(value: object, argument: str = "entry_id") -> str:
    """``value`` when it is an id an entry can have, else ``InvalidIdError`` naming
    ``argument``."""
    # The usual id, settled in line: every read by id and every page pays this check.
    if (
        isinstance(value, str)
        and 0 < len(value) <= ENTRY_ID_MAX_CHARS
        and value.isascii()
        and "\x00" not in value
    ):
        return value
    problem = id_problem(value)
    if problem is None:
        assert isinstance(value, str)
        return value
    raise InvalidIdError(
        f"{argument} must be an entry id (a string of 1-{ENTRY_ID_MAX_CHARS} characters, "
        f"no NUL or lone surrogate), got {shown(value)}, which {problem}",
        field=argument,
        entry_id=value if isinstance(value, str) else None,
    )


def check_leaf_id(value: object, argument: str = "leaf_id") -> str | None:
    """``check_entry_id`` for an argument where None means "the session's leaf" (or
    "from the start", for ``after_id``)."""
    return None if value is None else check_entry_id(value, argument)


def check_expected_memory_head(value: object) -> str | AnyMemoryHead | None:
    """``append_at_leaf``'s ``expected_memory_head``: ``ANY_MEMORY_HEAD``, None (no memory
    record yet) or an entry id, else ``InvalidIdError`` (an int would never equal a head,
    and be reported as stale coverage)."""
    if value is ANY_MEMORY_HEAD:
        return ANY_MEMORY_HEAD
    return check_leaf_id(value, "expected_memory_head")


def check_id_list(values: object, argument: str, *, memory: bool = False) -> builtins.list[str]:
    """The ids of ``values`` as a list (consumed once: a generator is fine), each checked
    as ``check_entry_id`` does; ``memory``: they are memory ids (the error's
    ``memory_id``). The common list of plain ASCII ids is checked in C, all at once."""
    if (
        values is None
        or isinstance(values, str | bytes | bytearray | SessionEntry)
        or not isinstance(values, Iterable)
    ):
        hint = "; pass [id] for one id" if isinstance(values, str) else ""
        raise InvalidInputError(
            f"{argument} must be an iterable of ids, got {shown(values)}{hint}", field=argument
        )
    ids = builtins.list(values)
    if _all_plain(ids):
        return ids
    for index, item in enumerate(ids):
        problem = id_problem(item)
        if problem is not None:
            where = f"{argument}[{index}]"
            raise InvalidIdError(
                f"{where} must be an id (a string of 1-{ENTRY_ID_MAX_CHARS} characters, no "
                f"NUL or lone surrogate), got {shown(item)}, which {problem}",
                field=where,
                entry_id=item if isinstance(item, str) and not memory else None,
                memory_id=item if isinstance(item, str) and memory else None,
            )
    return ids


def _all_plain(ids: builtins.list[Any]) -> bool:
    """True when every item is an ASCII string of 1-256 characters without a NUL."""
    if not ids:
        return True
    try:
        text = "".join(ids)
    except TypeError:  # an item that is not a string: the loop names it
        return False
    return (
        text.isascii()
        and "\x00" not in text
        and min(map(len, ids)) > 0
        and max(map(len, ids)) <= ENTRY_ID_MAX_CHARS
    )


def check_count(value: object, argument: str = "count") -> int:
    """``value`` when it is a non-negative safe integer (0 asks for nothing), else
    ``InvalidInputError``; a bool or a float is refused, as ``validate_limit`` does."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(
            f"{argument} must be a non-negative integer, got {shown(value)}", field=argument
        )
    if not 0 <= value <= MAX_SAFE_INTEGER:
        raise InvalidInputError(
            f"{argument} must be an integer from 0 to 2**53 - 1, got {shown(value)}",
            field=argument,
        )
    return value


def check_custom_type(value: object, argument: str = "custom_type") -> str:
    """``value`` when it is a ``data.type`` marker a stored custom entry can have (a
    non-empty string without a NUL or a lone surrogate), else ``InvalidInputError``
    naming ``argument``."""
    if (
        not isinstance(value, str)
        or not value
        or "\x00" in value
        or find_lone_surrogate(value) is not None
    ):
        raise InvalidInputError(
            f"{argument} must be a non-empty string without a NUL or a lone surrogate, "
            f"got {value!r}",
            field=argument,
        )
    return value


def check_page_args(limit: object, direction: object) -> None:
    """The page checks of ``page_messages``: the same errors as the public page functions
    (``core.limits.resolve_page_limit``), except that None is no default here."""
    if limit is None:
        raise InvalidInputError("limit must be a positive integer, got None", field="limit")
    resolve_page_limit(limit)  # type: ignore[arg-type]  # it checks the type itself
    if not isinstance(direction, str) or direction not in ("forward", "backward"):
        raise InvalidInputError(
            f"direction must be 'forward' or 'backward', got {shown(direction)}",
            field="direction",
        )


def check_batch_argument(entries: object) -> builtins.list[Any]:
    """``entries`` as a list, when it is a sequence (or another iterable) of items; the
    items themselves are ``check_batch_shape``'s to check. ``InvalidEntryError`` for None,
    one entry, a string or a mapping, which would otherwise be taken apart as a batch."""
    if isinstance(entries, SessionEntry):
        raise InvalidEntryError(
            "entries must be a sequence of entries, got one SessionEntry: use append(entry) "
            "or pass [entry]",
            field="entries",
            entry_id=entries.id if isinstance(entries.id, str) else None,
        )
    if (
        entries is None
        or isinstance(entries, str | bytes | bytearray | Mapping)
        or not isinstance(entries, Iterable)
    ):
        raise InvalidEntryError(
            f"entries must be a sequence of SessionEntry, got {shown(entries)}", field="entries"
        )
    return builtins.list(entries)
