"""pi coding agent session files (JSON lines, versions 1 to 3).

The file starts with a ``{"type": "session", "version", "id", "timestamp", "cwd", ...}``
header (no ``version``: version 1). Version 1 entries have no ids and form a chain in file
order; versions 2 and 3 link entries by ``id``/``parentId`` into a tree that may fork, and
pi starts a new tree (``parentId: null``) after a reset, so a file can hold several. Our
session has exactly one root, so the header becomes that root and every pi entry without a
parent hangs from it. A file without a header gets a synthetic root
``{"type": "pi.session", "headerMissing": true}``. Entries keep file order, so the session's
leaf is the file's last entry, as in pi.

================================  ===========================================================
pi entry                          entry
================================  ===========================================================
header ``session``                custom ``pi.session`` root with the header's fields
``message`` role user             user message (text and image parts)
``message`` role assistant        assistant message: text and thinking parts; ``toolCall``
                                  parts become tool calls; an ``errorMessage`` is appended
                                  as ``"[<stopReason>] <errorMessage>"`` text
``message`` role toolResult       tool message: ``toolCallId``, ``name`` = ``toolName``; an
                                  ``isError`` result starts with a ``"[tool error]"`` part
``message`` role bashExecution    user message named ``bashExecution``: ``"$ <command>"``,
                                  the output, and exit code / cancelled / truncated notes
                                  (pi shows the model the same as a user turn); with
                                  ``excludeFromContext`` (``!!`` commands the user kept from
                                  the model) a custom ``pi.message`` instead, so an observer
                                  does not read it either
``message`` role custom /         user message named by ``customType`` (v3 renamed
hookMessage                       ``hookMessage`` to ``custom``; pi sends both as user turns)
``message`` role branchSummary /  user message named by the role, text = ``summary``
compactionSummary
``message`` any other role        custom ``pi.message`` with the entry's fields
``compaction``                    compaction: ``summary``; ``data`` = the other fields plus
                                  ``"importedFrom": "pi"``
any other type (``model_change``, custom ``pi.<type>`` with the entry's fields
``thinking_level_change``,
``branch_summary``, ``custom``,
``custom_message``, ``label``,
``session_info``, ...)
================================  ===========================================================

Fields that name another pi entry (``targetId``, ``fromId``, ``firstKeptEntryId``; version
1's ``firstKeptEntryIndex``) stay as written, and when the target is in the file the new id
is added under ``data["importRefs"][<field>]`` (as ``firstKeptEntryId`` for the index).
Message metadata (provider, model, usage, stop reason, per-message times) has no place in our
message shape and is not kept.
"""

from __future__ import annotations

from typing import Any

from ..entries import SessionEntry
from .build import EntryFactory
from .content import parse_arguments, placeholder_part, text_part
from .source import Record, Source
from .times import TimeValue, present_time

__all__ = ["PI_ENTRY_TYPES", "parse_pi", "pi_version"]

# Entry types pi writes; detection uses them, conversion accepts any type.
PI_ENTRY_TYPES = frozenset(
    {
        "session",
        "message",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "model_change",
        "thinking_level_change",
        "context_transform",
        "ephemeral",
    }
)
_REF_FIELDS = ("targetId", "fromId", "firstKeptEntryId")


def pi_version(source: Source) -> int:
    """The file's format version: the header's, else guessed from the first entry."""
    first = source.records[0]
    if first.data.get("type") == "session":
        version = first.data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise source.error(first.pos, f"header 'version' must be 1, 2 or 3, got {version!r}")
        return version
    return 2 if "id" in first.data else 1


class _Tree:
    """Where each pi entry went: new ids by pi id (v2+) and by record index (v1)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.by_pi_id: dict[str, str] = {}
        self.first_pos: dict[str, int] = {}
        self.by_index: dict[int, str] = {}
        self.previous = root


def parse_pi(source: Source, factory: EntryFactory) -> list[SessionEntry]:
    """Convert a pi session file; every line becomes one entry under one root."""
    version = pi_version(source)
    records = source.records
    has_header = records[0].data.get("type") == "session"
    # Headers and model changes are dated too: the note counts entries, not messages.
    factory.date([_time_value(record.data) for record in records], unit="entries")
    root = _root(source, factory, records[0], has_header)
    entries = [root]
    tree = _Tree(root.id)
    if has_header:
        tree.by_index[0] = root.id
        factory.tick()
    for index in range(1 if has_header else 0, len(records)):
        record = records[index]
        entry = _convert(source, factory, record, index, version, tree)
        entries.append(entry)
        tree.by_index[index] = entry.id
        tree.previous = entry.id
        factory.tick()
    return entries


def _root(source: Source, factory: EntryFactory, first: Record, has_header: bool) -> SessionEntry:
    """The session's one root: the header, or a synthetic one dated like the first entry."""
    if has_header:
        key = "pi-header"
        data = {"type": "pi.session", **{k: v for k, v in first.data.items() if k != "type"}}
    else:
        key = "pi-root"
        data = {"type": "pi.session", "headerMissing": True}
    return factory.make(
        first.pos,
        {
            "id": factory.entry_id(key),
            "parentId": None,
            "kind": "custom",
            "timestamp": factory.timestamp(0),
            "data": data,
        },
    )


def _time_value(data: dict[str, Any]) -> TimeValue | None:
    """An entry's ``timestamp``, else its message's (pi keeps epoch milliseconds there)."""
    if present_time(data.get("timestamp")):
        return "timestamp", data["timestamp"]
    message = data.get("message")
    if isinstance(message, dict) and present_time(message.get("timestamp")):
        return "message.timestamp", message["timestamp"]
    return None


def _convert(
    source: Source,
    factory: EntryFactory,
    record: Record,
    index: int,
    version: int,
    tree: _Tree,
) -> SessionEntry:
    data, pos = record.data, record.pos
    kind = data.get("type")
    if not isinstance(kind, str) or not kind:
        raise source.error(pos, "expected a pi entry with a string 'type'")
    if kind == "session":
        raise source.error(pos, "a second session header: import one pi session at a time")
    if version >= 2:
        entry_id, parent_id = _tree_link(source, factory, record, tree)
    else:
        # Version 1 has no ids: entries chain in file order.
        entry_id, parent_id = factory.entry_id(source.where(pos)), tree.previous
    wire = _payload(source, data, pos, tree)
    wire["id"] = entry_id
    wire["parentId"] = parent_id
    wire["timestamp"] = factory.timestamp(index)
    return factory.make(pos, wire)


def _tree_link(
    source: Source, factory: EntryFactory, record: Record, tree: _Tree
) -> tuple[str, str]:
    data, pos = record.data, record.pos
    pi_id = data.get("id")
    if not isinstance(pi_id, str) or not pi_id:
        raise source.error(pos, "a version 2+ pi entry needs a string 'id'")
    if pi_id in tree.by_pi_id:
        first = source.where(tree.first_pos[pi_id])
        raise source.error(pos, f"entry id {pi_id!r} was already used at {first}")
    parent = data.get("parentId")
    if parent is None:
        parent_id = tree.root
    elif isinstance(parent, str) and parent in tree.by_pi_id:
        parent_id = tree.by_pi_id[parent]
    else:
        raise source.error(pos, f"parent {parent!r} is not an earlier entry of the file")
    entry_id = factory.entry_id(f"pi:{pi_id}")
    tree.by_pi_id[pi_id] = entry_id
    tree.first_pos[pi_id] = pos
    return entry_id, parent_id


def _payload(source: Source, data: dict[str, Any], pos: int, tree: _Tree) -> dict[str, Any]:
    kind = data["type"]
    fields = {k: v for k, v in data.items() if k != "type"}
    refs = _refs(data, tree)
    if kind == "message":
        message = data.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise source.error(pos, "a pi message entry needs 'message' with a string 'role'")
        converted = _message(source, pos, message)
        if converted is not None:
            return {"kind": "message", "message": converted}
        return {"kind": "custom", "data": _with_refs({"type": "pi.message", **fields}, refs)}
    if kind == "compaction":
        summary = data.get("summary")
        if not isinstance(summary, str):
            raise source.error(pos, "a pi compaction needs a string 'summary'")
        rest = {k: v for k, v in fields.items() if k != "summary"}
        return {
            "kind": "compaction",
            "summary": summary,
            "data": _with_refs({"importedFrom": "pi", **rest}, refs),
        }
    return {"kind": "custom", "data": _with_refs({"type": f"pi.{kind}", **fields}, refs)}


def _refs(data: dict[str, Any], tree: _Tree) -> dict[str, str]:
    refs: dict[str, str] = {}
    for field in _REF_FIELDS:
        value = data.get(field)
        if isinstance(value, str) and value in tree.by_pi_id:
            refs[field] = tree.by_pi_id[value]
    index = data.get("firstKeptEntryIndex")
    # Version 1 counts the header as index 0, as pi's own migration does.
    if isinstance(index, int) and index in tree.by_index and index > 0:
        refs["firstKeptEntryId"] = tree.by_index[index]
    return refs


def _with_refs(data: dict[str, Any], refs: dict[str, str]) -> dict[str, Any]:
    if refs:
        data["importRefs"] = refs
    return data


def _message(source: Source, pos: int, message: dict[str, Any]) -> dict[str, Any] | None:
    """Our message for a pi message, or None for one kept as a custom entry."""
    role = message["role"]
    if role == "user":
        content, _ = _content(source, pos, message.get("content"))
        return {"role": "user", "content": content}
    if role == "assistant":
        return _assistant(source, pos, message)
    if role == "toolResult":
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            raise source.error(pos, "a toolResult message needs a string 'toolCallId'")
        content, _ = _content(source, pos, message.get("content"))
        if message.get("isError") is True:
            content = [text_part("[tool error]"), *_as_parts(content)]
        result: dict[str, Any] = {"role": "tool", "content": content, "toolCallId": call_id}
        if isinstance(message.get("toolName"), str):
            result["name"] = message["toolName"]
        return result
    if role == "bashExecution":
        if message.get("excludeFromContext") is True:
            return None
        return {"role": "user", "content": _bash_text(message), "name": "bashExecution"}
    if role in ("custom", "hookMessage"):
        content, _ = _content(source, pos, message.get("content"))
        custom_type = message.get("customType")
        name = custom_type if isinstance(custom_type, str) and custom_type else role
        return {"role": "user", "content": content, "name": name}
    if role in ("branchSummary", "compactionSummary"):
        summary = message.get("summary")
        return {
            "role": "user",
            "content": summary if isinstance(summary, str) else "",
            "name": role,
        }
    return None


def _assistant(source: Source, pos: int, message: dict[str, Any]) -> dict[str, Any]:
    content, calls = _content(source, pos, message.get("content"), allow_calls=True)
    error = message.get("errorMessage")
    if isinstance(error, str) and error:
        stop = message.get("stopReason")
        label = stop if isinstance(stop, str) and stop else "error"
        content = [*_as_parts(content), text_part(f"[{label}] {error}")]
    result: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        result["toolCalls"] = calls
    return result


def _bash_text(message: dict[str, Any]) -> str:
    lines = [f"$ {message.get('command', '')}"]
    output = message.get("output")
    if isinstance(output, str) and output:
        lines.append(output.rstrip("\n"))
    if message.get("cancelled") is True:
        lines.append("(cancelled)")
    elif message.get("exitCode") is not None:
        lines.append(f"(exit code {message['exitCode']})")
    if message.get("truncated") is True:
        path = message.get("fullOutputPath")
        lines.append(f"(output truncated; full output in {path})" if path else "(truncated)")
    return "\n".join(lines)


def _as_parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return content
    return [text_part(content)] if content else []


def _content(
    source: Source, pos: int, value: object, *, allow_calls: bool = False
) -> tuple[str | list[dict[str, Any]], list[dict[str, Any]]]:
    """Content and (for an assistant) the tool calls pulled out of it."""
    if value is None:
        return "", []
    if isinstance(value, str):
        return value, []
    if not isinstance(value, list):
        raise source.error(pos, "message 'content' must be a string or a list of parts")
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for number, part in enumerate(value):
        if not isinstance(part, dict):
            raise source.error(pos, f"content[{number}] must be an object")
        kind = part.get("type")
        if kind == "text":
            parts.append(text_part(_string(source, pos, part, "text", number)))
        elif kind == "thinking":
            thinking = part.get("thinking")
            parts.append(
                {"type": "thinking", "thinking": thinking if isinstance(thinking, str) else ""}
            )
        elif kind == "image":
            image: dict[str, Any] = {"type": "image"}
            if isinstance(part.get("data"), str):
                image["data"] = part["data"]
            if isinstance(part.get("mimeType"), str):
                image["mimeType"] = part["mimeType"]
            parts.append(image)
        elif kind == "toolCall" and allow_calls:
            call_id = _string(source, pos, part, "id", number)
            name = _string(source, pos, part, "name", number)
            arguments = parse_arguments(part.get("arguments"))
            calls.append({"id": call_id, "name": name, "arguments": arguments})
        else:
            parts.append(placeholder_part(kind))
    return parts, calls


def _string(source: Source, pos: int, part: dict[str, Any], key: str, number: int) -> str:
    value = part.get(key)
    if not isinstance(value, str) or (key != "text" and not value):
        raise source.error(pos, f"content[{number}] needs a string {key!r}")
    return value
