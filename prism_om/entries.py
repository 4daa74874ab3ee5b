"""Session entries: the wire format shared by every store adapter.

Attributes are snake_case; the wire (a JSONL line, a SQLite JSON column) uses the
specification's camelCase names. ``SessionEntry.model_validate(wire)`` followed by
``entry.model_dump(by_alias=True, mode="json")`` gives back ``wire`` exactly: optional
fields that are absent on the wire stay absent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError, PydanticSerializationError

from .errors import EntryTooLargeError, InvalidEntryError, InvalidSessionIdError
from .ids import create_entry_id

__all__ = [
    "ENTRY_ID_MAX_CHARS",
    "MAX_ENTRY_DEPTH",
    "MESSAGE_DATA_RESERVED_PREFIX",
    "ContentPart",
    "EntryKind",
    "ImagePart",
    "Message",
    "Role",
    "SESSION_ID_PATTERN",
    "SessionEntry",
    "TextPart",
    "ThinkingPart",
    "ToolCall",
    "check_entry_size",
    "compaction_entry",
    "custom_entry",
    "entry_from_wire",
    "entry_text",
    "entry_wire_bytes",
    "find_lone_surrogate",
    "find_too_deep",
    "find_unstorable",
    "id_problem",
    "message_entry",
    "message_text",
    "now_timestamp",
    "sanitize_surrogates",
    "sanitize_surrogates_value",
    "validate_session_id",
]

Role = Literal["user", "assistant", "tool"]
EntryKind = Literal["message", "custom", "compaction"]

# Session ids double as file names in the JSONL adapter: no separators, no dot-only names.
SESSION_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def validate_session_id(session_id: object, *, field: str | None = None) -> str:
    """Return ``session_id`` when it is a safe name, else raise ``InvalidSessionIdError``.

    ``field``: the argument the error names, when the caller knows it (many callers check
    a scope or a principal id with this, so there is no default name).
    """
    if not isinstance(session_id, str) or not SESSION_ID_PATTERN.fullmatch(session_id):
        raise InvalidSessionIdError(
            f"invalid session id {session_id!r}: use 1-128 characters of [A-Za-z0-9._:-], "
            "starting with a letter or digit",
            field=field,
            session_id=session_id if isinstance(session_id, str) else None,
        )
    if ".." in session_id:
        raise InvalidSessionIdError(
            f"invalid session id {session_id!r}: '..' is not allowed",
            field=field,
            session_id=session_id,
        )
    return session_id


ENTRY_ID_MAX_CHARS: Final = 256
"""The longest entry id; an id argument of a store read is held to the same length."""

MAX_ENTRY_DEPTH: Final = 128
"""How deep an entry's ``data``, or a tool call's ``arguments``, may nest objects and
arrays (the value itself is level 1). The wire JSON of any entry within it nests at most
132 levels, below the 200 at which the JSON parser stops, so that every stored entry
reads back, and no check over it (size, surrogates, record caps) can recurse too deep."""

# Any surrogate code point: a Python str may hold one, but no UTF-8 text (a file, a JSON
# column, a provider request) can, so it would fail only later, when the entry is written.
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_REPLACEMENT = "\ufffd"


def _bad(text: str | None) -> bool:
    return isinstance(text, str) and not text.isascii() and _SURROGATE.search(text) is not None


def _valid_text(text: str) -> bool:
    """No surrogate in ``text``: one C test for ASCII, one regex scan for the rest (a
    real conversation's accents, dashes and curly quotes)."""
    return text.isascii() or _SURROGATE.search(text) is None


def id_problem(value: object) -> str | None:
    """Why ``value`` cannot be an entry or memory id a store holds, or None when it can be.

    An id is a string of 1 to ``ENTRY_ID_MAX_CHARS`` characters without a NUL (which
    PostgreSQL cannot keep in a text column) or a lone surrogate (which no UTF-8 text
    can hold): the rule every adapter applies to every id argument of its methods.
    """
    if not isinstance(value, str):
        return f"is not a string ({type(value).__name__})"
    if not value:
        return "is empty"
    if len(value) > ENTRY_ID_MAX_CHARS:
        return f"is longer than {ENTRY_ID_MAX_CHARS} characters ({len(value):,})"
    if "\x00" in value:
        return "holds a NUL character"
    if _bad(value):
        return "holds a lone surrogate (half of a UTF-16 pair)"
    return None


def _containers(value: object) -> list[object]:
    """The objects and arrays directly inside ``value`` (none unless it is one itself)."""
    if isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, dict | list | tuple)]
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, dict | list | tuple)]
    return []


def find_too_deep(value: object, path: str = "value", limit: int = MAX_ENTRY_DEPTH) -> str | None:
    """The path of the first object or array of ``value`` nested more than ``limit``
    levels deep (``value`` itself is level 1), or None when none is.

    Walked level by level without recursion, so a value nested a million levels deep is
    answered, not a ``RecursionError``; the path is looked for only once one is found.
    """
    level: list[object] = [value] if isinstance(value, dict | list | tuple) else []
    depth = 1
    while level and depth <= limit:
        level = [inner for item in level for inner in _containers(item)]
        depth += 1
    if not level:
        return None
    # The deep branch is there: follow it down from the top, naming each step.
    stack: list[tuple[object, str, int]] = [(value, path, 1)]
    while stack:
        item, where, depth = stack.pop()
        if depth > limit:
            return where
        if isinstance(item, dict):
            steps = [(v, f"{where}.{k}") for k, v in item.items()]
        elif isinstance(item, list | tuple):
            steps = [(v, f"{where}[{n}]") for n, v in enumerate(item)]
        else:
            continue
        stack.extend((v, w, depth + 1) for v, w in reversed(steps))
    return None  # pragma: no cover - the walk above found a deeper value


def find_unstorable(entry: SessionEntry) -> tuple[str, str] | None:
    """The first field of ``entry`` that no store can keep, and why, or None.

    A ``data`` or tool-call ``arguments`` value nested beyond ``MAX_ENTRY_DEPTH``; an id,
    parent id or timestamp that is not a string (an entry changed with ``model_copy``
    skips validation), or that holds a NUL, as does a custom entry's ``data.type``: SQL
    stores keep those in text columns, and PostgreSQL cannot store a NUL there. (A NUL in
    message text or inside ``data`` is kept: it is escaped in the stored JSON.)
    """
    message = entry.message
    if message is not None:
        for index, call in enumerate(message.tool_calls or ()):
            where = find_too_deep(call.arguments, f"message.tool_calls[{index}].arguments")
            if where is not None:
                return where, f"nests deeper than {MAX_ENTRY_DEPTH} levels"
    data = entry.data
    if data is not None:
        where = find_too_deep(data, "data")
        if where is not None:
            return where, f"nests deeper than {MAX_ENTRY_DEPTH} levels"
    problem = id_problem(entry.id)
    if problem is not None:
        return "id", problem
    for name in ("parent_id", "timestamp"):
        value = getattr(entry, name)
        if value is None and name == "parent_id":
            continue
        if not isinstance(value, str):
            return name, f"is not a string ({type(value).__name__})"
        if "\x00" in value:
            return name, "holds a NUL character"
    marker = data.get("type") if isinstance(data, dict) else None
    if isinstance(marker, str) and "\x00" in marker:
        return "data.type", "holds a NUL character"
    return None


def find_lone_surrogate(value: object, path: str = "") -> str | None:
    """The path (``message.content``, ``data.items[2]``...) of the first string in
    ``value`` (an entry or a JSON-like value) that holds a surrogate code point, or None
    when all its text is valid Unicode."""
    if isinstance(value, str):
        return (path or "value") if _bad(value) else None
    if isinstance(value, SessionEntry):
        return _entry_surrogate(value)
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and _bad(key):
                return f"{path or 'value'} (a key)"
            found = find_lone_surrogate(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = find_lone_surrogate(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


# Message data (a host's record kept with its message) of at most this many values,
# nested at most this deep, is checked with its message in one walk by the plain-message
# fast paths below; deeper or bigger data takes the field-by-field checks.
_PLAIN_DATA_DEPTH = 8
_PLAIN_DATA_VALUES = 256
# Bytes one value of such data can take when serialised besides its strings' characters
# (counted apart): punctuation, a 64-bit int, a finite float's repr, true/false/null.
_DATA_VALUE_BYTES = 32
_INT64 = 1 << 63
_INF = float("inf")


def _plain_data_strings(data: object, out: list[str]) -> int | None:
    """Append every key and string of ``data`` to ``out`` and return how many values it
    holds (itself included), or None when it is not plain JSON for the fast paths: a
    type other than exactly dict (of str keys), list, str, bool, None, a 64-bit int or
    a finite float, more than ``_PLAIN_DATA_VALUES`` values, or nesting deeper than
    ``_PLAIN_DATA_DEPTH`` (far within ``MAX_ENTRY_DEPTH``). Only containers are stacked:
    the leaves are settled where they are met, since this runs twice per append."""
    if type(data) is not dict and type(data) is not list:
        return None
    stack: list[tuple[Any, int]] = [(data, 1)]
    values = 1
    while stack:
        container, depth = stack.pop()
        if type(container) is dict:
            for key in container:
                if type(key) is not str:
                    return None
                out.append(key)
            children = container.values()
        else:
            children = container
        values += len(children)
        if values > _PLAIN_DATA_VALUES:
            return None
        for child in children:
            kind = type(child)
            if kind is str:
                out.append(child)
            elif kind is dict or kind is list:
                if depth + 1 > _PLAIN_DATA_DEPTH:
                    return None
                stack.append((child, depth + 1))
            elif kind is int:
                if not -_INT64 <= child < _INT64:
                    return None
            elif kind is float:
                if child != child or child in (_INF, -_INF):
                    return None
            elif child is not None and kind is not bool:
                return None
    return values


def _plain_message_data(data: object, out: list[str]) -> int | None:
    """``_plain_data_strings`` of a message's data whose marker is a string outside the
    reserved ``om.`` namespace (what validation checks; an entry changed with
    ``model_copy`` may not hold it, and is left to the field-by-field checks)."""
    marker = data.get("type") if type(data) is dict else None
    if type(marker) is not str or marker.startswith(MESSAGE_DATA_RESERVED_PREFIX):
        return None
    return _plain_data_strings(data, out)


def _plain_content(content: object) -> tuple[str, int] | None:
    """A message's content as one string, with the bytes its parts take besides their
    text: a string as is, a list of text parts joined (an SDK assistant message); None
    for any other content (images, thinking, a value set by ``model_copy``)."""
    if isinstance(content, str):
        return content, 0
    if type(content) is not list or any(type(part) is not TextPart for part in content):
        return None
    try:
        return "".join([part.text for part in content]), _DATA_VALUE_BYTES * len(content)
    except TypeError:
        return None


def _plain_message_text(entry: SessionEntry) -> tuple[str, int] | None:
    """Every text field of a plain message (string content, no tool calls, data None or
    plain: ``_plain_data_strings``) joined, with the bytes its data's values take besides
    their strings, for checks that one test of the whole can settle; None for any other
    entry."""
    message = entry.message
    if message is None or message.tool_calls:
        return None
    content = _plain_content(message.content)
    if content is None:
        return None
    text, extra = content
    texts: list[str] = []
    if entry.data is not None:
        values = _plain_message_data(entry.data, texts)
        if values is None:
            return None
        extra += _DATA_VALUE_BYTES * values
    try:
        return "".join(
            (
                entry.id,
                entry.session_id,
                "" if entry.parent_id is None else entry.parent_id,
                entry.timestamp,
                "" if entry.summary is None else entry.summary,
                text,
                "" if message.tool_call_id is None else message.tool_call_id,
                "" if message.name is None else message.name,
                *texts,
            )
        ), extra
    except TypeError:  # a field set to a non-string by model_copy: searched field by field
        return None


def _entry_surrogate(entry: SessionEntry) -> str | None:
    # Field by field rather than through model_fields: this runs on every append.
    message = entry.message
    plain = _plain_message_text(entry)
    # One test of all their text: a plain message holds no surrogate anywhere else.
    if plain is not None and _valid_text(plain[0]):
        return None
    for name in ("id", "session_id", "parent_id", "timestamp", "summary"):
        if _bad(getattr(entry, name)):
            return name
    if message is not None:
        if isinstance(message.content, str):
            if _bad(message.content):
                return "message.content"
        else:
            for index, part in enumerate(message.content):
                for name in ("text", "thinking", "data", "url", "mime_type"):
                    if _bad(getattr(part, name, None)):
                        return f"message.content[{index}].{name}"
        if _bad(message.tool_call_id) or _bad(message.name):
            return "message"
        for index, call in enumerate(message.tool_calls or ()):
            where = f"message.tool_calls[{index}]"
            if _bad(call.id) or _bad(call.name):
                return where
            found = find_lone_surrogate(call.arguments, f"{where}.arguments")
            if found is not None:
                return found
    if entry.data is not None:
        return find_lone_surrogate(entry.data, "data")
    return None


def sanitize_surrogates(text: str) -> tuple[str, int]:
    """``text`` as valid Unicode, and how many characters were replaced.

    Two surrogates that form a pair (UTF-16 split into halves, as a stream cut between
    them leaves it) become the character they encode; any other surrogate becomes U+FFFD.
    """
    if text.isascii() or not _SURROGATE.search(text):
        return text, 0
    joined = _SURROGATE_PAIR.sub(
        lambda m: m.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le"), text
    )
    return _SURROGATE.subn(_REPLACEMENT, joined)


def sanitize_surrogates_value(value: Any) -> tuple[Any, int]:
    """``sanitize_surrogates`` over every string (and key) of a JSON-like value."""
    if isinstance(value, str):
        return sanitize_surrogates(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        total = 0
        for key, item in value.items():
            if isinstance(key, str):
                key, count = sanitize_surrogates(key)
                total += count
            out[key], count = sanitize_surrogates_value(item)
            total += count
        return out, total
    if isinstance(value, list | tuple):
        items = []
        total = 0
        for item in value:
            clean, count = sanitize_surrogates_value(item)
            items.append(clean)
            total += count
        return type(value)(items), total
    return value, 0


def now_timestamp() -> str:
    """The current UTC time as an ISO 8601 string with milliseconds and a ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _field_error(field: str, message: str) -> PydanticCustomError:
    """A validator's refusal that names the field, for ``InvalidEntryError.field``."""
    return PydanticCustomError(_FIELD_ERROR, "{message}", {"field": field, "message": message})


_FIELD_ERROR = "entry_field"


class WireModel(BaseModel):
    """Base for wire models: camelCase aliases, strict keys, absent optionals stay absent."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    # Field names (snake_case) that are written even when None.
    _keep_none: ClassVar[frozenset[str]] = frozenset()

    # Per class: (attribute, alias) of every field that may be dropped when None.
    @classmethod
    def _optional_fields(cls) -> tuple[tuple[str, str], ...]:
        cached = cls.__dict__.get("_optional_cache")
        if cached is None:
            cached = tuple(
                (name, field.alias or name)
                for name, field in cls.model_fields.items()
                if name not in cls._keep_none and not field.is_required()
            )
            cls._optional_cache = cached  # type: ignore[attr-defined]
        return cached

    @model_serializer(mode="wrap")
    def _drop_absent(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        by_alias = bool(info.by_alias)
        for name, alias in self._optional_fields():
            if getattr(self, name) is None:
                data.pop(alias if by_alias else name, None)
        return data

    def to_wire(self) -> dict[str, Any]:
        """The wire form: JSON-ready, camelCase keys, absent optional fields left out."""
        return self.model_dump(by_alias=True, mode="json")


class TextPart(WireModel):
    type: Literal["text"] = "text"
    text: str


class ImagePart(WireModel):
    type: Literal["image"] = "image"
    data: str | None = None
    url: str | None = None
    mime_type: str | None = None


class ThinkingPart(WireModel):
    type: Literal["thinking"] = "thinking"
    thinking: str


ContentPart = Annotated[TextPart | ImagePart | ThinkingPart, Field(discriminator="type")]


class ToolCall(WireModel):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(WireModel):
    role: Role
    content: str | list[ContentPart] = ""
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _tool_rules(self) -> Message:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs toolCallId")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only an assistant message carries toolCalls")
        return self

    def text(self) -> str:
        """The message's text: plain content, or its text parts joined by newlines."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


def _check_timestamp(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"timestamp {value!r} is not ISO 8601") from exc
    return value


MESSAGE_DATA_RESERVED_PREFIX: Final = "om."
"""The ``data.type`` prefix of the memory records, refused on a message entry's data."""


class SessionEntry(WireModel):
    """One node of a session's entry tree.

    A message entry may carry ``data`` too (from schema version 7): an object with a
    string ``type`` marker (not ``om.*``) that a host keeps with the message, such as
    ``PrismSession``'s record of the SDK item the message came from. It is never part
    of what a model is sent or what a token estimate counts.
    """

    _keep_none: ClassVar[frozenset[str]] = frozenset({"parent_id"})

    id: str = Field(min_length=1, max_length=ENTRY_ID_MAX_CHARS)
    session_id: str
    parent_id: str | None = None
    kind: EntryKind
    timestamp: str
    message: Message | None = None
    data: dict[str, Any] | None = None
    summary: str | None = None

    @field_validator("session_id")
    @classmethod
    def _session_id(cls, value: str) -> str:
        try:
            return validate_session_id(value)
        except InvalidSessionIdError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("timestamp")
    @classmethod
    def _timestamp(cls, value: str) -> str:
        return _check_timestamp(value)

    @model_validator(mode="after")
    def _payload_matches_kind(self) -> SessionEntry:
        if self.kind == "message":
            if self.message is None:
                raise ValueError("a message entry needs 'message'")
            if self.summary is not None:
                raise ValueError("a message entry carries no 'summary'")
            if self.data is not None:
                # A host's record of the message (schema version 7), e.g. the SDK item
                # it came from. Memory records are custom entries, so their markers
                # cannot ride on a message: every reader of a marker would take it for one.
                marker = self.data.get("type")
                if not isinstance(marker, str) or not marker:
                    raise ValueError("a message entry's 'data' needs a string 'type' marker")
                if marker.startswith(MESSAGE_DATA_RESERVED_PREFIX):
                    raise ValueError(
                        f"a message entry's data.type {marker!r} is reserved: "
                        f"{MESSAGE_DATA_RESERVED_PREFIX!r} markers belong to custom entries"
                    )
        elif self.kind == "custom":
            if self.data is None or not isinstance(self.data.get("type"), str):
                raise ValueError("a custom entry needs 'data' with a string 'type' marker")
            if self.message is not None or self.summary is not None:
                raise ValueError("a custom entry carries no 'message' or 'summary'")
        else:
            if self.summary is None:
                raise ValueError("a compaction entry needs 'summary'")
            if self.message is not None:
                raise ValueError("a compaction entry carries no 'message'")
        if self.parent_id == self.id:
            raise ValueError("an entry cannot be its own parent")
        return self

    @model_validator(mode="after")
    def _valid_unicode(self, info: ValidationInfo) -> SessionEntry:
        # Parsed JSON cannot hold a surrogate (the parser refuses the escape) nor nest past
        # its limit; Python objects can, and would fail only when written, or never read
        # back. A NUL in parsed JSON is left to the append check, so that a store reading
        # back what it holds does not refuse it.
        if info.mode == "json":
            return self
        unstorable = find_unstorable(self)
        if unstorable is not None:
            raise _field_error(unstorable[0], f"field {unstorable[0]!r} {unstorable[1]}")
        where = find_lone_surrogate(self)
        if where is not None:
            raise _field_error(
                where,
                f"field {where!r} holds a lone surrogate (half of a UTF-16 pair); entry text "
                "must be valid Unicode",
            )
        return self

    @property
    def custom_type(self) -> str | None:
        """The ``data.type`` marker of a custom entry or of a message entry that carries
        ``data``, else None (a memory record's ``om.*`` marker is only ever a custom
        entry's)."""
        if self.kind != "compaction" and self.data is not None:
            marker = self.data.get("type")
            return marker if isinstance(marker, str) else None
        return None

    @property
    def role(self) -> Role | None:
        return self.message.role if self.message is not None else None

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True)


def entry_from_wire(wire: object, *, where: str = "entry") -> SessionEntry:
    """Validate a wire dict (or JSON text) into an entry, raising ``InvalidEntryError``."""
    try:
        if isinstance(wire, str | bytes):
            return SessionEntry.model_validate_json(wire)
        return SessionEntry.model_validate(wire)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        named = first.get("ctx", {}).get("field") if first["type"] == _FIELD_ERROR else None
        ident = wire.get("id") if isinstance(wire, dict) else None
        session = wire.get("sessionId") if isinstance(wire, dict) else None
        # Only a string id is quoted: repr of any other value could be huge, or recurse.
        label = f"{where} {ident!r}" if isinstance(ident, str) and ident else where
        if field:
            label += f": field {field!r}"
        message = first["msg"].removeprefix("Value error, ")
        raise InvalidEntryError(
            f"{label}: {message}",
            field=named or field or None,
            entry_id=ident if isinstance(ident, str) else None,
            session_id=session if isinstance(session, str) else None,
        ) from None


def entry_text(entry: SessionEntry) -> str:
    """The text a token estimate or a render sees for an entry."""
    if entry.message is not None:
        return message_text(entry.message)
    if entry.kind == "compaction":
        return entry.summary or ""
    return _compact_json(entry.data or {})


def message_text(message: Message) -> str:
    """``entry_text`` of a message entry, from its message alone."""
    if not message.tool_calls:  # most messages: no parts to join
        return message.text()
    parts = [message.text()]
    for call in message.tool_calls:
        parts.append(f"{call.name}({_compact_json(call.arguments)})")
    return "\n".join(p for p in parts if p)


def _compact_json(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def message_entry(
    session_id: str,
    role: Role,
    content: str | list[Any],
    *,
    parent_id: str | None = None,
    entry_id: str | None = None,
    timestamp: str | None = None,
    tool_calls: list[ToolCall] | list[dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    data: dict[str, Any] | None = None,
) -> SessionEntry:
    """Build a message entry with a fresh id and the current time unless given; ``data``
    is a host's record kept with it (see ``SessionEntry``)."""
    wire: dict[str, Any] = {"role": role, "content": content}
    if tool_calls is not None:
        wire["toolCalls"] = [
            c.model_dump(by_alias=True) if isinstance(c, ToolCall) else c for c in tool_calls
        ]
    if tool_call_id is not None:
        wire["toolCallId"] = tool_call_id
    entry = _envelope("message", session_id, parent_id, entry_id, timestamp)
    entry["message"] = wire
    if data is not None:
        entry["data"] = data
    return entry_from_wire(entry)


def _envelope(
    kind: EntryKind,
    session_id: str,
    parent_id: str | None,
    entry_id: str | None,
    timestamp: str | None,
) -> dict[str, Any]:
    """The wire keys every new entry has: a fresh id and the current time unless given."""
    return {
        "id": entry_id or create_entry_id(),
        "sessionId": session_id,
        "parentId": parent_id,
        "kind": kind,
        "timestamp": timestamp or now_timestamp(),
    }


def custom_entry(
    session_id: str,
    data: dict[str, Any],
    *,
    parent_id: str | None = None,
    entry_id: str | None = None,
    timestamp: str | None = None,
) -> SessionEntry:
    """Build a custom entry; ``data`` must carry its ``type`` marker."""
    wire = _envelope("custom", session_id, parent_id, entry_id, timestamp)
    wire["data"] = data
    return entry_from_wire(wire)


def compaction_entry(
    session_id: str,
    summary: str,
    data: dict[str, Any] | None = None,
    *,
    parent_id: str | None = None,
    entry_id: str | None = None,
    timestamp: str | None = None,
) -> SessionEntry:
    """Build a compaction entry."""
    wire = _envelope("compaction", session_id, parent_id, entry_id, timestamp)
    wire["summary"] = summary
    if data is not None:
        wire["data"] = data
    return entry_from_wire(wire)


# Bytes a message's envelope can take besides its strings (keys, quotes, kind, role).
_ENVELOPE_BYTES = 512
# One character serialises to at most 6 bytes (a control character as ``\u00XX``).
_MAX_BYTES_PER_CHAR = 6


def entry_wire_bytes(entry: SessionEntry) -> int:
    """Size in bytes of the entry's serialised wire JSON (a JSONL line without its newline)."""
    try:
        return len(SessionEntry.__pydantic_serializer__.to_json(entry, by_alias=True))
    except PydanticSerializationError as exc:
        raise InvalidEntryError(
            f"entry {entry.id!r} cannot be serialised: {exc}",
            entry_id=entry.id,
            session_id=entry.session_id,
        ) from None


def _cheap_size_bound(entry: SessionEntry) -> int | None:
    """An upper bound of ``entry_wire_bytes`` from string lengths, for plain messages.

    Most entries are messages with string content; bounding them costs a few ``len``
    calls, so only entries that might be near the cap pay for a serialisation.
    """
    message = entry.message
    if (
        message is None
        or not isinstance(message.content, str)
        or message.tool_calls
        # A message's data can be of any size: such an entry is serialised and measured.
        or entry.data is not None
    ):
        return None
    chars = (
        len(message.content)
        + len(entry.summary or "")
        + len(entry.id)
        + len(entry.session_id)
        + len(entry.parent_id or "")
        + len(entry.timestamp)
        + len(message.tool_call_id or "")
        + len(message.name or "")
    )
    return _MAX_BYTES_PER_CHAR * chars + _ENVELOPE_BYTES


def plain_message_within(entry: SessionEntry, max_bytes: int) -> bool:
    """True when ``entry`` is a plain message (string content or text parts only, no
    tool calls, data None or plain: ``_plain_data_strings``) of valid Unicode whose size
    bound is within ``max_bytes``: then neither ``check_entry_size`` nor
    ``find_lone_surrogate`` can fail for it, and an append checks it with one call, not
    one per check (False: run those checks)."""
    plain = _plain_message_text(entry)
    # The bound is _cheap_size_bound's (it adds the summary and the data's strings and
    # values): 6 bytes a character covers UTF-8's 4 and a control character's escape.
    if plain is None or not _valid_text(plain[0]):
        return False
    text, extra = plain
    return _MAX_BYTES_PER_CHAR * len(text) + _ENVELOPE_BYTES + extra <= max_bytes


def plain_messages_within(batch: Sequence[object], max_bytes: int) -> bool:
    """True when every item of ``batch`` is a ``SessionEntry`` passing
    ``plain_message_within``, all of one session (the first's), no id twice and no
    NUL in its text: then every per-entry append check passes, settled for the whole
    batch in one loop, one surrogate test of all its text and one size sum (False: check
    entry by entry, which names the culprit)."""
    first = batch[0] if batch else None
    if not isinstance(first, SessionEntry) or not isinstance(first.session_id, str):
        return False
    session_id = first.session_id
    parts: list[str] = []
    # The strings of messages' data, and the bytes their values take besides them.
    data_texts: list[str] = []
    extra = 0
    for entry in batch:
        if not isinstance(entry, SessionEntry):
            return False
        message = entry.message
        if message is None or entry.session_id != session_id or message.tool_calls:
            return False
        content = _plain_content(message.content)
        if content is None:
            return False
        extra += content[1]
        if entry.data is not None:
            values = _plain_message_data(entry.data, data_texts)
            if values is None:
                return False
            extra += _DATA_VALUE_BYTES * values
        # A field None where a string may be None, as is: a non-string fails the join.
        parts += (
            entry.id,
            "" if entry.parent_id is None else entry.parent_id,
            entry.timestamp,
            "" if entry.summary is None else entry.summary,
            content[0],
            "" if message.tool_call_id is None else message.tool_call_id,
            "" if message.name is None else message.name,
        )
    ids = parts[::7]
    try:
        if len(set(ids)) != len(batch):
            return False
        text = "".join(parts) + "".join(data_texts)
    except TypeError:  # a field set to a non-string by model_copy: the slow path says which
        return False
    # Each entry's bound (its text with the session id) is within the bound of the sum.
    chars = len(text) + len(session_id) * len(batch)
    return (
        _valid_text(text)
        and session_id.isascii()
        and _MAX_BYTES_PER_CHAR * chars + _ENVELOPE_BYTES + extra <= max_bytes
        # find_unstorable's rules: ids of 1-256 characters, no NUL in an envelope field
        # (nor, to be safe, in data, where only data.type may not hold one).
        and "\x00" not in text
        and min(map(len, ids)) > 0
        and max(map(len, ids)) <= ENTRY_ID_MAX_CHARS
    )


def check_entry_size(entry: SessionEntry, max_bytes: int) -> None:
    """Raise ``EntryTooLargeError`` when the entry's wire JSON is above ``max_bytes``."""
    bound = _cheap_size_bound(entry)
    if bound is not None and bound <= max_bytes:
        return
    size = entry_wire_bytes(entry)
    if size > max_bytes:
        raise EntryTooLargeError(
            f"entry {entry.id!r} of session {entry.session_id!r} is {size:,} bytes serialised, "
            f"above the hard cap of {max_bytes:,} bytes (MAX_ENTRY_BYTES)",
            entry_id=entry.id,
            session_id=entry.session_id,
        )
