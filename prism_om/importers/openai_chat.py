"""OpenAI-style chat messages: ``[{role, content}, ...]`` as an array, JSON lines or
``{"messages": [...]}``.

Every record becomes exactly one entry, chained in file order (each the parent of the next):

=====================  ==================================================================
source                 entry
=====================  ==================================================================
role system/developer  custom ``{"type": "import.system", "role", "content"[, "name"]}``
                       (our message roles are user/assistant/tool; a prompt is kept, not
                       dropped)
role user              user message; ``name`` kept
role assistant         assistant message; ``tool_calls[].function`` become tool calls with
                       parsed arguments (unparsable: ``{"_raw": text}``); a legacy
                       ``function_call`` becomes a tool call with a synthetic id; a
                       ``refusal`` becomes a ``"[refusal] ..."`` text part
role tool              tool message with ``toolCallId`` from ``tool_call_id`` (required)
role function          tool message (legacy); ``toolCallId`` is the id given to the latest
                       unanswered ``function_call`` of that name, else ``function:<name>``
any other role         custom ``{"type": "import.message", ...the record's fields}``
=====================  ==================================================================

Content parts: ``text`` (also ``input_text``/``output_text``) → text; ``image_url`` → an
image part with ``url``; ``refusal`` → text; other kinds → a placeholder text part. Time
comes from the first of ``timestamp``, ``created_at``, ``created`` and ``time`` present
(see ``times`` for the formats and the fallback).
Other record fields (ids, usage, audio...) are not kept on message entries.
"""

from __future__ import annotations

from typing import Any

from ..entries import SessionEntry
from .build import EntryFactory
from .content import parse_arguments, placeholder_part, text_part
from .source import Source
from .times import TimeValue, present_time

__all__ = ["TIME_FIELDS", "parse_openai", "time_value"]

TIME_FIELDS = ("timestamp", "created_at", "created", "time")
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


class _Chain:
    """State carried from record to record: the parent and unanswered legacy calls."""

    def __init__(self) -> None:
        self.parent: str | None = None
        self.legacy_calls: dict[str, str] = {}


def parse_openai(source: Source, factory: EntryFactory) -> list[SessionEntry]:
    """Convert every record of an OpenAI-style chat file, in order."""
    chain = _Chain()
    entries: list[SessionEntry] = []
    factory.date([time_value(record.data) for record in source.records])
    for index, record in enumerate(source.records):
        data, pos = record.data, record.pos
        wire = _payload(source, pos, data, chain)
        wire["id"] = factory.entry_id(source.where(pos))
        wire["parentId"] = chain.parent
        wire["timestamp"] = factory.timestamp(index)
        entry = factory.make(pos, wire)
        entries.append(entry)
        chain.parent = entry.id
        factory.tick()
    return entries


def time_value(data: dict[str, Any]) -> TimeValue | None:
    """The record's first time field present (an empty string is absent), with its name."""
    return next(((k, data[k]) for k in TIME_FIELDS if present_time(data.get(k))), None)


def _payload(source: Source, pos: int, data: dict[str, Any], chain: _Chain) -> dict[str, Any]:
    role = data.get("role")
    if not isinstance(role, str) or not role:
        raise source.error(pos, "expected a chat message with a string 'role'")
    if role in ("system", "developer"):
        record: dict[str, Any] = {
            "type": "import.system",
            "role": role,
            "content": data.get("content"),
        }
        if data.get("name") is not None:
            record["name"] = data["name"]
        return {"kind": "custom", "data": record}
    message: dict[str, Any]
    if role == "user":
        message = {"role": "user", "content": _content(source, pos, data.get("content"))}
    elif role == "assistant":
        message = _assistant(source, pos, data, chain)
    elif role == "tool":
        call_id = data.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise source.error(pos, "a tool message needs a string 'tool_call_id'")
        message = {
            "role": "tool",
            "content": _content(source, pos, data.get("content")),
            "toolCallId": call_id,
        }
    elif role == "function":
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise source.error(pos, "a function message needs a string 'name'")
        message = {
            "role": "tool",
            "content": _content(source, pos, data.get("content")),
            "toolCallId": chain.legacy_calls.pop(name, f"function:{name}"),
            "name": name,
        }
        return {"kind": "message", "message": message}
    else:
        fields = {k: v for k, v in data.items() if k != "type"}
        return {"kind": "custom", "data": {"type": "import.message", **fields}}
    if isinstance(data.get("name"), str):
        message["name"] = data["name"]
    return {"kind": "message", "message": message}


def _assistant(source: Source, pos: int, data: dict[str, Any], chain: _Chain) -> dict[str, Any]:
    content: str | list[dict[str, Any]] = _content(source, pos, data.get("content"))
    refusal = data.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts = [text_part(content)] if isinstance(content, str) and content else []
        if isinstance(content, list):
            parts = content
        content = [*parts, text_part(f"[refusal] {refusal}")]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    calls = _tool_calls(source, pos, data.get("tool_calls"))
    legacy = data.get("function_call")
    if legacy is not None:
        if not isinstance(legacy, dict) or not isinstance(legacy.get("name"), str):
            raise source.error(pos, "'function_call' needs a string 'name'")
        call_id = f"function-call-{source.where(pos).replace(' ', '-')}"
        chain.legacy_calls[legacy["name"]] = call_id
        calls.append(
            {
                "id": call_id,
                "name": legacy["name"],
                "arguments": parse_arguments(legacy.get("arguments")),
            }
        )
    if calls:
        message["toolCalls"] = calls
    return message


def _tool_calls(source: Source, pos: int, value: object) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise source.error(pos, "'tool_calls' must be a list")
    calls: list[dict[str, Any]] = []
    for number, call in enumerate(value):
        if not isinstance(call, dict):
            raise source.error(pos, f"tool_calls[{number}] must be an object")
        kind = call.get("type", "function")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            # A call without an id cannot be answered; give it a stable one.
            call_id = f"call-{source.where(pos).replace(' ', '-')}-{number}"
        body = call.get(kind) if isinstance(kind, str) else None
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise source.error(pos, f"tool_calls[{number}] needs '{kind}' with a string 'name'")
        if kind == "function":
            arguments = parse_arguments(body.get("arguments"))
        else:
            # Free-form ("custom") tools take text input rather than JSON arguments.
            arguments = {"input": body.get("input")}
        calls.append({"id": call_id, "name": body["name"], "arguments": arguments})
    return calls


def _content(source: Source, pos: int, value: object) -> str | list[dict[str, Any]]:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise source.error(pos, "'content' must be a string or a list of parts")
    parts: list[dict[str, Any]] = []
    for number, part in enumerate(value):
        if isinstance(part, str):
            parts.append(text_part(part))
            continue
        if not isinstance(part, dict):
            raise source.error(pos, f"content[{number}] must be an object or a string")
        kind = part.get("type")
        if kind in _TEXT_PART_TYPES:
            text = part.get("text")
            if not isinstance(text, str):
                raise source.error(pos, f"content[{number}] needs a string 'text'")
            parts.append(text_part(text))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise source.error(pos, f"content[{number}] needs 'image_url.url'")
            parts.append({"type": "image", "url": url})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append(text_part(f"[refusal] {part['refusal']}"))
        else:
            parts.append(placeholder_part(kind))
    return parts
