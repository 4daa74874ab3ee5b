"""Reading an import file into positioned JSON records, with no format knowledge yet.

A file is one of three layouts:

* ``jsonl``: one JSON object per line; a record's position is its 1-based line number
  (blank lines are skipped but still counted, so positions match an editor);
* ``array``: a JSON array of objects; a record's position is its 0-based array index;
* ``object``: a JSON object ``{"messages": [...]}``; positions index ``messages``.

A JSON lines file whose only record is ``{"messages": [...]}`` (the chat fine-tuning
layout) is read as the ``object`` layout; several such lines are several conversations,
which one import cannot hold.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from .errors import ImportFormatError

__all__ = ["Layout", "Record", "Source", "read_source"]

Layout = Literal["jsonl", "array", "object"]


@dataclass(frozen=True, slots=True)
class Record:
    """One JSON object of the file and where it was."""

    pos: int
    data: dict[str, Any]


@dataclass(frozen=True)
class Source:
    """A parsed file: its name for messages, its layout, its records and a content hash."""

    name: str
    layout: Layout
    records: list[Record]
    digest: str

    def error(
        self,
        pos: int | None,
        reason: str,
        *,
        entry_id: str | None = None,
        session_id: str | None = None,
    ) -> ImportFormatError:
        """An ``ImportFormatError`` located at a record position (None: the whole file)."""
        jsonl = pos is not None and self.layout == "jsonl"
        return ImportFormatError(
            self.name,
            reason,
            line=pos if jsonl else None,
            index=None if jsonl else pos,
            entry_id=entry_id,
            session_id=session_id,
        )

    def where(self, pos: int) -> str:
        """A record position in words, for messages that name a second record."""
        return f"line {pos}" if self.layout == "jsonl" else f"index {pos}"


def read_source(data: bytes, name: str) -> Source:
    """Split the file's bytes into records, raising ``ImportFormatError`` on bad JSON."""
    digest = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ImportFormatError(name, "not UTF-8 text", line=line) from None
    head = text.lstrip()
    if not head:
        raise ImportFormatError(name, "the file is empty")
    if head[0] == "[":
        return _read_array(text, name, digest)
    whole = _try_whole(text)
    if head[0] != "{" and whole is not None:
        raise ImportFormatError(name, _unknown_shape(whole))
    if head[0] != "{":
        line = text[: len(text) - len(head)].count("\n") + 1
        raise ImportFormatError(
            name, "not JSON: expected a JSON array, a JSON object or JSON lines", line=line
        )
    if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
        return _object_source(whole["messages"], name, digest)
    if isinstance(whole, dict) and text.strip().count("\n"):
        # Valid JSON over several lines, so not JSON lines, and not {"messages": [...]}:
        # the file parses, its shape is what no importer knows.
        raise ImportFormatError(name, _unknown_shape(whole))
    records = _read_lines(text, name)
    if records and all(_is_conversation(r.data) for r in records):
        if len(records) > 1:
            raise ImportFormatError(
                name,
                f"holds {len(records)} conversations (one 'messages' list per line); "
                "import them one file at a time",
            )
        return _object_source(records[0].data["messages"], name, digest)
    return Source(name, "jsonl", records, digest)


def _unknown_shape(value: object) -> str:
    keys = sorted(value)[:8] if isinstance(value, dict) else []
    what = f"a JSON object with keys {', '.join(map(repr, keys))}" if keys else _json_type(value)
    return (
        f"not a known transcript shape: the file is valid JSON ({what}), but an import "
        'reads a JSON array of messages, {"messages": [...]} or JSON lines (one message or '
        "entry per line)"
    )


def _try_whole(text: str) -> object:
    # One JSON value in the whole text: a pretty-printed {"messages": [...]} object, or a
    # one-line JSONL file. A multi-line JSONL file fails fast at its second line.
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _loads(text: str, name: str, line: int) -> object:
    """``json.loads`` whose every failure is an ``ImportFormatError`` at ``line``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            name, f"invalid JSON: {exc.msg}", line=line + exc.lineno - 1
        ) from None
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        raise ImportFormatError(name, f"invalid JSON: {exc}", line=line) from None
    except RecursionError:
        raise ImportFormatError(name, "invalid JSON: nested too deeply", line=line) from None


def _is_conversation(data: dict[str, Any]) -> bool:
    return isinstance(data.get("messages"), list) and not ({"role", "type", "kind"} & data.keys())


def _read_array(text: str, name: str, digest: str) -> Source:
    value = _loads(text, name, 1)
    if not isinstance(value, list):
        raise ImportFormatError(name, "expected a JSON array of objects")
    return Source(name, "array", _records_of(value, name, "array"), digest)


def _object_source(items: list[Any], name: str, digest: str) -> Source:
    return Source(name, "object", _records_of(items, name, "object"), digest)


def _records_of(items: list[Any], name: str, layout: Layout) -> list[Record]:
    records: list[Record] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ImportFormatError(
                name, f"expected a JSON object, got {_json_type(item)}", index=index
            )
        records.append(Record(index, item))
    if not records:
        raise ImportFormatError(name, f"the {layout} holds no messages")
    return records


def _read_lines(text: str, name: str) -> list[Record]:
    records: list[Record] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        value = _loads(line, name, number)
        if not isinstance(value, dict):
            raise ImportFormatError(
                name, f"expected a JSON object, got {_json_type(value)}", line=number
            )
        records.append(Record(number, value))
    return records


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
