"""OpenAI Agents SDK input items <-> session entries (pure, no SDK import).

Every item is stored verbatim in one custom entry, ``{"type": "openai-agents.item",
"item": <the item>}``, so ``get_items()`` gives back exactly what ``add_items()`` was
given. An item with a message meaning is also written as an ordinary message entry right
before it, which the observer reads and recall cites; the item's entry names it
(``"messageId"``):

===========================  =====================================================
item                         message entry
===========================  =====================================================
message, role user           user message (text parts kept, other parts as
                             ``[<part type>]``)
message, role assistant      assistant message (output text; refusal as text)
``function_call``            assistant message with one tool call (``call_id``,
                             ``name``, parsed ``arguments``)
``function_call_output``     tool message answering ``call_id``
anything else                none: reasoning, system/developer messages, hosted
                             tool calls, ... are only the custom entry
===========================  =====================================================
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ...entries import SessionEntry, custom_entry, message_entry
from ...errors import InvalidEntryError, InvalidInputError
from ...importers.content import parse_arguments

__all__ = [
    "ITEM_TYPE",
    "ROOT_TYPE",
    "entries_for_item",
    "item_message",
    "item_of",
    "normalize_items",
    "withheld_item",
]

ITEM_TYPE: Final = "openai-agents.item"
ROOT_TYPE: Final = "openai-agents.session"
"""The root a ``PrismSession`` gives a new session: clearing moves the leaf back to it."""

_TEXT_PARTS: Final = frozenset({"input_text", "output_text", "text"})


def normalize_items(items: object) -> list[dict[str, Any]]:
    """The items as JSON would give them back (what ``SQLiteSession`` stores and returns).

    Raises ``InvalidInputError`` naming the first item that is not a JSON object.
    """
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise InvalidInputError(f"items must be a list of input items, got {type(items).__name__}")
    normalized: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidInputError(
                f"item {index} must be a JSON object (a dict), got {type(item).__name__}"
            )
        try:
            text = json.dumps(item, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"item {index} is not JSON-serialisable: {exc}") from None
        except RecursionError:
            raise InvalidInputError(f"item {index} nests too deeply to serialise") from None
        normalized.append(json.loads(text))
    return normalized


def _text(value: object) -> str | list[dict[str, Any]] | None:
    """Message content (a string or a list of content parts) as our content, else None."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return None
    parts: list[dict[str, Any]] = []
    for part in value:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append({"type": "text", "text": f"[refusal] {part['refusal']}"})
        else:
            # An image, file or audio part: the reader sees that one was there.
            parts.append({"type": "text", "text": f"[{kind if isinstance(kind, str) else 'part'}]"})
    return parts


def item_message(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """``message_entry`` keyword arguments for an item with a message meaning, else None."""
    kind = item.get("type", "message")
    call_id = item.get("call_id")
    if kind == "message":
        role = item.get("role")
        content = _text(item.get("content"))
        if role not in ("user", "assistant") or content is None:
            return None
        return {"role": role, "content": content}
    if not isinstance(call_id, str) or not call_id:
        return None
    if kind == "function_call":
        name = item.get("name")
        if not isinstance(name, str) or not name:
            return None
        arguments = parse_arguments(item.get("arguments"))
        call = {"id": call_id, "name": name, "arguments": arguments}
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if kind == "function_call_output":
        output = _text(item.get("output"))
        if output is None:
            return None
        return {"role": "tool", "content": output, "tool_call_id": call_id}
    return None


def entries_for_item(session_id: str, item: dict[str, Any], *, index: int) -> list[SessionEntry]:
    """The entries that store one (normalized) item: its message entry, if any, then
    the item's own custom entry. ``InvalidEntryError`` names the item by ``index``."""
    data: dict[str, Any] = {"type": ITEM_TYPE, "item": item}
    entries: list[SessionEntry] = []
    fields = item_message(item)
    try:
        if fields is not None:
            role, content = fields.pop("role"), fields.pop("content")
            message = message_entry(session_id, role, content, **fields)
            entries.append(message)
            data["messageId"] = message.id
        entries.append(custom_entry(session_id, data))
    except InvalidEntryError as exc:
        raise InvalidEntryError(f"item {index}: {exc}", session_id=session_id) from None
    return entries


def item_of(entry: SessionEntry) -> dict[str, Any] | None:
    """A copy of the item an item entry holds (the caller may change it), else None."""
    if entry.custom_type != ITEM_TYPE or entry.data is None:
        return None
    item = entry.data.get("item")
    return copy.deepcopy(item) if isinstance(item, dict) else None


def withheld_item(item: Mapping[str, Any], entry_id: str) -> dict[str, Any] | None:
    """What a revoked item reads as: its place and call ids, no text (None: left out).

    A call keeps its ``call_id`` and name, so its output still answers a call, and an
    output keeps its ``call_id``; a message keeps its role. Other item types are left out.
    """
    marker = f"[revoked] {entry_id}"
    kind = item.get("type", "message")
    if kind == "function_call":
        return {
            "type": "function_call",
            "call_id": item.get("call_id"),
            "name": item.get("name"),
            "arguments": "{}",
        }
    if kind == "function_call_output":
        return {"type": "function_call_output", "call_id": item.get("call_id"), "output": marker}
    if kind == "message" and isinstance(item.get("role"), str):
        return {"role": item["role"], "content": marker}
    return None
