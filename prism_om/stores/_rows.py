"""Entry rows of the SQL stores: the envelope in columns, the payload as JSON (schema 4).

Up to schema version 3, ``entries.body`` held each entry's whole wire JSON, and every
read validated it again into a ``SessionEntry``. From version 4 the envelope (id,
sessionId, parentId, kind, timestamp) is read from the columns that always held copies
of it, and ``body`` holds only the rest, the *payload*:

- a message entry: its ``message`` object (what ``SQLiteSession`` stores per item);
- a custom entry: its ``data`` object;
- a compaction: ``{"summary": ..., "data": ...}`` (the wire less the envelope keys).

From schema version 7 a message entry may carry ``data`` as well (``SessionEntry``): it
is kept in the ``data`` column beside the message payload (NULL for every other row), so
the message payloads still parse as one array of messages.

Every entry was validated when it entered the store (``append``, an import), so reads
build entries from these rows without validating them again: the message payloads of a
read are parsed in one pydantic-core call with the models' own schema less their
Python after-validators (types, required fields and the content-part union are still
checked, in Rust), and the entry around each is set from the columns. A row that does
not parse raises ``CorruptStoreError`` naming its entry (``bad_row``); the adapters add
the store to it.
The wire format is unchanged: an entry read back equals the one appended, field for
field, and serialises to the same bytes.

The reads know only this shape: a store of an older version is migrated before anything
reads it (a read-only open refuses it). The one compatibility reader of the older shape
is ``stored_entry`` (with ``wire_from_row``): what the migrations read, so that a row of
either shape is validated, and what ``prism-om check`` validates an unmigrated file with.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import SchemaSerializer, SchemaValidator, core_schema, from_json

from ..entries import Message, SessionEntry, entry_from_wire
from ..errors import CorruptStoreError, InvalidEntryError

__all__ = [
    "PAYLOAD_SINCE_VERSION",
    "bad_row",
    "bad_row_reason",
    "rewrite_bodies_as_payloads",
    "stored_entry",
    "entries_from_rows",
    "entry_columns",
    "PART_COLUMNS",
    "message_parts",
    "message_serializer",
    "payload_json",
    "MESSAGE_DATA_SINCE_VERSION",
    "message_data_json",
    "wire_from_row",
]

# The first schema version whose ``entries.body`` is the payload, not the whole wire: the
# compatibility reader (``stored_entry``, ``wire_from_row``) and the migration use it.
PAYLOAD_SINCE_VERSION = 4

# Every read of whole entries selects these columns, in this order.
_COLUMNS = ("id", "session_id", "parent_id", "kind", "timestamp")

# The first schema version with the ``entries.data`` column (a message entry's data).
MESSAGE_DATA_SINCE_VERSION = 7


def entry_columns(alias: str = "", *, data: bool = True) -> str:
    """The column list of an entry row: ``id, session_id, parent_id, kind, timestamp,
    CAST(body AS BLOB), CAST(data AS BLOB)`` (prefixed with ``alias.``). The casts make
    sqlite3 hand back bytes for the JSON parser; PostgreSQL's transpiler drops them
    (``dialect``). ``data=False`` selects NULL in the last place: for a store older than
    version 7 (a migration step before it, ``prism-om check`` of an old file), or a
    read that needs the message text only."""
    prefix = f"{alias}." if alias else ""
    last = f"CAST({prefix}data AS BLOB)" if data else "NULL"
    return ", ".join(f"{prefix}{c}" for c in _COLUMNS) + f", CAST({prefix}body AS BLOB), {last}"


def bad_row(entry_id: str, reason: str) -> CorruptStoreError:
    """The error of a stored entry row that does not read back (no store named yet)."""
    return CorruptStoreError(f"entry {entry_id!r}: {reason}", entry_id=entry_id)


def bad_row_reason(exc: CorruptStoreError) -> str:
    """Why a row did not read back: ``bad_row``'s message less its ``entry ...:`` head."""
    return str(exc).removeprefix(f"entry {exc.entry_id!r}: ")


# -- writing ---------------------------------------------------------------------------

_DATA = TypeAdapter(dict[str, Any])


def _without_drop_absent(schema: Any) -> Any:
    """A copy of a core schema without ``WireModel._drop_absent``'s wrap serializers."""
    if isinstance(schema, dict):
        return {
            key: value if key == "metadata" else _without_drop_absent(value)
            for key, value in schema.items()
            if not (
                key == "serialization"
                and isinstance(value, dict)
                and value.get("type") == "function-wrap"
            )
        }
    if isinstance(schema, list):
        return [_without_drop_absent(item) for item in schema]
    return schema


@functools.cache
def _message_serializer() -> SchemaSerializer:
    """``Message``'s own serializer less its Python wrap step, all in Rust.

    ``_drop_absent`` drops the optional fields that are None, and every nullable field of
    ``Message`` and its parts and tool calls is optional with no ``_keep_none``; so
    ``exclude_none=True`` (which touches model fields only, never a value inside
    ``arguments``) writes the same bytes, without a Python call per model.
    """
    return SchemaSerializer(_without_drop_absent(Message.__pydantic_core_schema__))


# The serializer of a message payload, for an encoder that looks it up once per batch.
message_serializer = _message_serializer


def payload_json(entry: SessionEntry) -> str:
    """The entry's payload as stored in ``entries.body`` from schema version 4.

    Serialised by the same pydantic serializers as the entry's wire JSON, so the payload
    is exactly the corresponding part of ``entry.to_json()``.
    """
    if entry.message is not None:
        return (
            _message_serializer().to_json(entry.message, by_alias=True, exclude_none=True).decode()
        )
    if entry.kind == "custom":
        return _DATA.dump_json(entry.data or {}).decode()
    rest: dict[str, Any] = {"summary": entry.summary}
    if entry.data is not None:
        rest["data"] = entry.data
    return _DATA.dump_json(rest).decode()


def message_data_json(entry: SessionEntry) -> str | None:
    """What ``entries.data`` holds for the entry (schema version 7): a message entry's
    ``data`` as JSON, else None (a custom entry's data is its ``body``)."""
    if entry.message is None or entry.data is None:
        return None
    return _DATA.dump_json(entry.data).decode()


# -- reading ---------------------------------------------------------------------------


def _without_after_validators(schema: Any) -> Any:
    """A copy of a core schema with every ``function-after`` validator removed."""
    if isinstance(schema, dict):
        if schema.get("type") == "function-after":
            return _without_after_validators(schema["schema"])
        return {
            key: value if key in {"serialization", "metadata"} else _without_after_validators(value)
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_without_after_validators(item) for item in schema]
    return schema


@functools.cache
def _stored_messages() -> SchemaValidator:
    """``list[Message]`` from JSON, less ``Message``'s Python rule checks (they held at
    append, and a stored message cannot have changed since)."""
    item = _without_after_validators(Message.__pydantic_core_schema__)
    return SchemaValidator(core_schema.list_schema(item))


# Fields set by validation of each kind's wire (parentId is always on the wire).
_SET_BY_KIND = {
    "message": frozenset({"id", "session_id", "parent_id", "kind", "timestamp", "message"}),
    "custom": frozenset({"id", "session_id", "parent_id", "kind", "timestamp", "data"}),
    "compaction": frozenset({"id", "session_id", "parent_id", "kind", "timestamp", "summary"}),
}
_new = object.__new__
_set: Callable[[object, str, object], None] = object.__setattr__


def _entry(
    row: Sequence[Any], message: Message | None, data: Any, summary: str | None
) -> SessionEntry:
    """A ``SessionEntry`` from trusted values: what validation would build, without it."""
    entry_id, session_id, parent_id, kind, timestamp = row[0], row[1], row[2], row[3], row[4]
    entry: SessionEntry = _new(SessionEntry)
    _set(
        entry,
        "__dict__",
        {
            "id": entry_id,
            "session_id": session_id,
            "parent_id": parent_id,
            "kind": kind,
            "timestamp": timestamp,
            "message": message,
            "data": data,
            "summary": summary,
        },
    )
    fields = set(_SET_BY_KIND[kind])
    if kind == "compaction" and data is not None:
        fields.add("data")
    _set(entry, "__pydantic_fields_set__", fields)
    _set(entry, "__pydantic_extra__", None)
    _set(entry, "__pydantic_private__", None)
    return entry


_MESSAGE_FIELDS = set(_SET_BY_KIND["message"])
_MESSAGE_DATA_FIELDS = frozenset(_MESSAGE_FIELDS | {"data"})
_copy_fields = set.copy


def _message_entry(row: Sequence[Any], message: Message) -> SessionEntry:
    """``_entry`` of a message row: the same entry, in one call per row (most rows of
    any read are messages)."""
    if len(row) > 6 and row[6] is not None:
        return _message_with_data(row, message)
    entry: SessionEntry = _new(SessionEntry)
    _set(
        entry,
        "__dict__",
        {
            "id": row[0],
            "session_id": row[1],
            "parent_id": row[2],
            "kind": row[3],
            "timestamp": row[4],
            "message": message,
            "data": None,
            "summary": None,
        },
    )
    _set(entry, "__pydantic_fields_set__", _copy_fields(_MESSAGE_FIELDS))
    _set(entry, "__pydantic_extra__", None)
    _set(entry, "__pydantic_private__", None)
    return entry


def _message_with_data(row: Sequence[Any], message: Message) -> SessionEntry:
    """A message row whose ``data`` column is set (schema version 7)."""
    try:
        data = from_json(row[6])
    except ValueError as exc:
        raise bad_row(
            str(row[0]), f"its stored message data no longer parses ({_first_line(exc)})"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise bad_row(str(row[0]), "its stored message data is not an object with a string 'type'")
    entry = _entry(row, message, data, None)
    _set(entry, "__pydantic_fields_set__", set(_MESSAGE_DATA_FIELDS))
    return entry


def _json_text(row: Sequence[Any]) -> bytes | str:
    body = row[5]
    if not isinstance(body, bytes | str):
        raise bad_row(str(row[0]), f"the body is {type(body).__name__}, not JSON text")
    return body


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{first['type']}: {first['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _other_kind(row: Sequence[Any]) -> SessionEntry:
    """A custom entry or a compaction from its payload row."""
    kind = row[3]
    try:
        value = from_json(_json_text(row))
    except ValueError as exc:
        raise bad_row(
            str(row[0]), f"its stored JSON no longer parses ({_first_line(exc)})"
        ) from exc
    if kind == "custom":
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise bad_row(str(row[0]), "its stored data is not an object with a string 'type'")
        return _entry(row, None, value, None)
    if kind == "compaction":
        summary = value.get("summary") if isinstance(value, dict) else None
        data = value.get("data") if isinstance(value, dict) else None
        if not isinstance(summary, str) or not (data is None or isinstance(data, dict)):
            raise bad_row(str(row[0]), "its stored compaction is not {summary, data}")
        return _entry(row, None, data, summary)
    raise bad_row(str(row[0]), f"its kind column holds {kind!r}")


def _messages(rows: Sequence[Sequence[Any]]) -> list[Message]:
    """The message payloads of ``rows`` in one parse; per row when one of them is bad."""
    texts = [row[5] for row in rows]
    validator = _stored_messages()
    joined: bytes | str
    try:
        # SQLite's bodies are bytes (the CAST): joined as they are, no check per row.
        joined = b"[" + b",".join(texts) + b"]"
    except TypeError:
        # Text bodies (PostgreSQL's), or one that is not JSON text at all (named here).
        texts = [_json_text(row) for row in rows]
        joined = "[" + ",".join(t if isinstance(t, str) else t.decode() for t in texts) + "]"
    try:
        parsed: list[Message] = validator.validate_json(joined)
    except (ValidationError, ValueError):
        parsed = []
    if len(parsed) == len(rows):
        return parsed
    # Find the row to blame: a bad one can also swallow its neighbours (an unclosed
    # string), so each is parsed alone.
    parsed = []
    for row, text in zip(rows, texts, strict=True):
        try:
            parsed.append(_stored_message(text))
        except (ValidationError, ValueError) as exc:
            raise bad_row(
                str(row[0]), f"its stored JSON no longer parses ({_first_line(exc)})"
            ) from exc
    return parsed


def _stored_message(text: bytes | str) -> Message:
    wrapped = b"[" + text + b"]" if isinstance(text, bytes) else f"[{text}]"
    found: list[Message] = _stored_messages().validate_json(wrapped)
    if len(found) != 1:
        raise ValueError("the body holds more than one JSON value")
    return found[0]


def entries_from_rows(rows: Iterable[Sequence[Any]]) -> list[SessionEntry]:
    """Entries from rows of ``entry_columns()`` (payload bodies), in order.

    Raises ``CorruptStoreError`` (``bad_row``) for the first row (in row order among its
    kind) that does not read.
    """
    rows = rows if isinstance(rows, list) else list(rows)
    messages = [row for row in rows if row[3] == "message"]
    parsed = _messages(messages) if messages else []
    if len(messages) == len(rows):
        return list(map(_message_entry, rows, parsed))
    next_message = iter(parsed).__next__
    return [
        _message_entry(row, next_message()) if row[3] == "message" else _other_kind(row)
        for row in rows
    ]


PART_COLUMNS = "id, timestamp, CAST(body AS BLOB)"
"""The columns of a message part's row: id, timestamp, payload."""


def message_parts(rows: Sequence[Sequence[Any]]) -> list[tuple[str, str, Message]]:
    """``(id, timestamp, message)`` of ``PART_COLUMNS`` rows of message entries, in order.

    The payloads parse in one pydantic-core call, SQLite's bytes and PostgreSQL's text
    alike; a row that does not parse raises ``bad_row`` naming its entry, as
    ``entries_from_rows`` does.
    """
    if not rows:
        return []
    texts = [row[2] for row in rows]
    joined: bytes | str | None
    try:
        joined = b"[" + b",".join(texts) + b"]"
    except TypeError:
        try:
            joined = "[" + ",".join(texts) + "]"
        except TypeError:
            joined = None  # a body that is not JSON text: named below
    parsed: list[Message] = []
    if joined is not None:
        try:
            parsed = _stored_messages().validate_json(joined)
        except (ValidationError, ValueError):
            parsed = []
    if len(parsed) != len(rows):
        # Find the row to blame, each alone (a bad one can swallow its neighbours).
        parsed = []
        for row in rows:
            body = row[2]
            if not isinstance(body, bytes | str):
                raise bad_row(str(row[0]), f"the body is {type(body).__name__}, not JSON text")
            try:
                parsed.append(_stored_message(body))
            except (ValidationError, ValueError) as exc:
                raise bad_row(
                    str(row[0]), f"its stored JSON no longer parses ({_first_line(exc)})"
                ) from exc
    return [(row[0], row[1], message) for row, message in zip(rows, parsed, strict=True)]


# -- the compatibility reader and the migration from schema version 3 -------------------


def _whole_wire(row: Sequence[Any]) -> SessionEntry:
    """An entry from a row of schema 3 or older, whose body is the whole wire JSON."""
    entry_id = str(row[0])
    try:
        entry = SessionEntry.model_validate_json(_json_text(row))
    except ValidationError as exc:
        raise bad_row(entry_id, f"its stored JSON no longer parses ({_first_line(exc)})") from exc
    if entry.id != entry_id:
        raise bad_row(entry_id, f"its stored JSON holds id {entry.id!r}")
    return entry


def wire_from_row(row: Sequence[Any], version: int) -> Any:
    """The wire form of an entry row of a store of schema ``version``, for the validating
    reads (``prism-om check``, which reads a file of any version as it is, and
    ``stored_entry``): the body itself up to schema 3, else the envelope columns around
    the decoded payload."""
    if version < PAYLOAD_SINCE_VERSION:
        return row[5]
    entry_id, session_id, parent_id, kind, timestamp = row[:5]
    wire: dict[str, Any] = {
        "id": entry_id,
        "sessionId": session_id,
        "parentId": parent_id,
        "kind": kind,
        "timestamp": timestamp,
    }
    try:
        value = from_json(_json_text(row))
    except ValueError:
        # Validation then names the entry and the field.
        value = None
    if kind == "message":
        wire["message"] = value
        stored = row[6] if len(row) > 6 else None
        if stored is not None:
            try:
                wire["data"] = from_json(stored)
            except ValueError:
                wire["data"] = stored  # validation then names the entry and the field
    elif kind == "custom":
        wire["data"] = value
    elif isinstance(value, dict):
        wire.update(value)
    return wire


def stored_entry(row: Sequence[Any]) -> tuple[SessionEntry, bool]:
    """The entry of a row of either shape, validated, and whether its body held the whole
    wire: what a migration reads, so that a row already rewritten (a step run again on a
    store whose version stamp lags its rows) is recognised rather than refused.

    The shapes cannot be confused: a whole wire is not a valid payload of its kind (its
    keys are not a message's, and a custom entry's wire has no top-level ``type``).
    """
    try:
        return _whole_wire(row), True
    except CorruptStoreError as whole:
        try:
            return entry_from_wire(wire_from_row(row, PAYLOAD_SINCE_VERSION)), False
        except InvalidEntryError:
            raise whole from None


# Rows rewritten per statement pair of the migration: bounded memory on any store size.
MIGRATION_CHUNK = 2000
_MIGRATION_READ_SQL = (
    "SELECT seq, id, session_id, parent_id, kind, timestamp, CAST(body AS BLOB) FROM entries "
    "WHERE seq > ? ORDER BY seq LIMIT ?"
)
_MIGRATION_WRITE_SQL = "UPDATE entries SET body = ? WHERE seq = ?"


async def rewrite_bodies_as_payloads(conn: Any) -> int:
    """Schema 3 to 4: each entry's whole wire JSON in ``body`` becomes its payload.

    ``conn`` is the migrating connection inside its one transaction (aiosqlite's, or the
    PostgreSQL adapter's, which speaks this SQL through the transpiler). Each body is
    validated one last time (the data enters its new shape here) and must agree with the
    envelope columns, which from now on are the only copy of it; a row that does not
    raises ``CorruptStoreError`` naming the entry, and the caller's rollback leaves the
    store at version 3, untouched. Returns the number of rows rewritten.
    """
    done = last = 0
    while True:
        rows = list(await conn.execute_fetchall(_MIGRATION_READ_SQL, (last, MIGRATION_CHUNK)))
        if not rows:
            return done
        updates = []
        for seq, *row in rows:
            try:
                entry, whole = stored_entry(row)
            except CorruptStoreError as exc:
                raise CorruptStoreError(
                    f"{exc}; the migration to schema version {PAYLOAD_SINCE_VERSION} was "
                    "rolled back and the store is unchanged: repair it (prism-om check) first",
                    entry_id=exc.entry_id,
                ) from exc
            envelope = (entry.id, entry.session_id, entry.parent_id, entry.kind, entry.timestamp)
            if tuple(row[:5]) != envelope:
                raise CorruptStoreError(
                    f"entry {entry.id!r}: its columns {tuple(row[:5])!r} disagree with its "
                    f"stored JSON {envelope!r}; the migration to schema version "
                    f"{PAYLOAD_SINCE_VERSION} was rolled back and the store is unchanged",
                    entry_id=entry.id,
                )
            if whole:
                updates.append((payload_json(entry), seq))
        if updates:
            await conn.executemany(_MIGRATION_WRITE_SQL, updates)
        done += len(rows)
        last = rows[-1][0]
