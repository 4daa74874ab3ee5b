"""OpenAI Agents SDK input items <-> session entries (pure, no SDK import).

Every item is one entry (schema version 7). An item with a message meaning is a message
entry, which the observer reads and recall cites, carrying the item in its ``data``:
``{"type": "openai-agents.item", "item": <the item>, "textInMessage": true}``, where the
item's text that the message holds word for word is left empty (``""``) and filled back
from the message on read, so the text is stored once. Any other item is one custom entry,
``{"type": "openai-agents.item", "item": <the item>}``. Either way ``get_items()`` gives
back exactly what ``add_items()`` was given: the split is checked when the entry is built,
and an item that would not come back whole keeps all its text in ``data``.

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
                             tool calls, ... are a custom entry
===========================  =====================================================

Stores written before version 7 hold each message item as two entries, the message and
then a custom entry with the whole item naming it (``"messageId"``); they are read as
they are (the message entry alone is no item), so an older history and newer items on
it read back alike. Entries are never rewritten: their ids are what memory cites.
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
    "entry_for_item",
    "item_message",
    "item_of",
    "item_of_data",
    "items_of_marked",
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


def _text_key(item: Mapping[str, Any]) -> str | None:
    """The key of the item's text that its message entry holds, if any."""
    kind = item.get("type", "message")
    if kind == "message":
        return "content"
    if kind == "function_call_output":
        return "output"
    return None


def _fill(item: dict[str, Any], content: object) -> dict[str, Any]:
    """``item`` (changed in place) with its emptied text set back from its message's
    ``content`` (a string, or parts as models or wire dicts, one per item part): the
    inverse of ``_emptied`` for what ``item_message`` copied. Run once per item a read
    returns, so it is written flat."""
    key = _text_key(item)
    if key is None:
        return item
    value = item.get(key)
    if isinstance(value, str):
        if isinstance(content, str):
            item[key] = content
    elif isinstance(value, list) and isinstance(content, list) and len(content) == len(value):
        for part, source in zip(value, content, strict=True):
            if _is_text_part(part):
                text = (
                    source.get("text")
                    if isinstance(source, dict)
                    else getattr(source, "text", None)
                )
                if isinstance(text, str):
                    part["text"] = text
    return item


def _is_text_part(part: object) -> bool:
    return (
        isinstance(part, dict)
        and part.get("type") in _TEXT_PARTS
        and isinstance(part.get("text"), str)
    )


def _emptied(item: dict[str, Any], text: str | None = "") -> dict[str, Any]:
    """A copy of ``item`` with the text its message holds word for word set to ``text``
    (``""``; None: left as it is). Only the objects on the way to that text are copied:
    the rest is shared with ``item``, which is the caller's own (``normalize_items``)."""
    residue = dict(item)
    key = _text_key(residue)
    value = residue.get(key) if key is not None else None
    if isinstance(value, str):
        if text is not None:
            residue[key] = text  # type: ignore[index]
    elif isinstance(value, list):
        residue[key] = [  # type: ignore[index]
            {**part, "text": part["text"] if text is None else text}
            if _is_text_part(part)
            else part
            for part in value
        ]
    return residue


def entry_for_item(session_id: str, item: dict[str, Any], *, index: int) -> SessionEntry:
    """The one entry that stores a (normalized) item: a message entry carrying the item
    in its data when the item has a message meaning, else a custom entry.
    ``InvalidEntryError`` names the item by ``index``."""
    fields = item_message(item)
    try:
        if fields is None:
            return custom_entry(session_id, {"type": ITEM_TYPE, "item": item})
        role, content = fields.pop("role"), fields.pop("content")
        residue = _emptied(item)
        # Stored without its text only when the message gives it back word for word
        # (filled into a copy of the objects _fill changes).
        whole = _fill(_emptied(residue, None), content) == item
        data: dict[str, Any] = (
            {"type": ITEM_TYPE, "item": residue, "textInMessage": True}
            if whole and residue != item
            else {"type": ITEM_TYPE, "item": item}
        )
        return message_entry(session_id, role, content, data=data, **fields)
    except InvalidEntryError as exc:
        raise InvalidEntryError(f"item {index}: {exc}", session_id=session_id) from None


def _filled(data: Mapping[str, Any], message: Any, item: dict[str, Any]) -> dict[str, Any]:
    """``item`` (the caller's own) with the text its data left in ``message`` (a
    ``Message`` or its wire form) put back, when it left any (``"textInMessage"``)."""
    if message is not None and data.get("textInMessage") is True:
        _fill(item, message.get("content") if isinstance(message, dict) else message.content)
    return item


def item_of_data(data: Mapping[str, Any], message: Any = None) -> dict[str, Any] | None:
    """A fresh copy of the item that an item entry's ``data`` holds (None if none):
    ``message`` is the entry's message when the data left its text there."""
    item = data.get("item")
    return _filled(data, message, copy.deepcopy(item)) if isinstance(item, dict) else None


def items_of_marked(marked: Iterable[tuple[Mapping[str, Any], Any]]) -> list[dict[str, Any]]:
    """The items of ``SessionStore.marked_data`` rows ((data, message) pairs, already the
    caller's own objects, so nothing is copied), in order: the read of a whole history
    (``get_items()`` without memory)."""
    items: list[dict[str, Any]] = []
    append = items.append
    for data, message in marked:
        item = data.get("item")
        if not isinstance(item, dict):
            continue
        if message is not None and data.get("textInMessage") is True:
            content = message.get("content") if isinstance(message, dict) else message.content
            value = item.get("content")
            # A user's or system's text item (the most common kind) is filled here, in
            # line; every other shape as _filled fills it.
            if (
                type(value) is str
                and type(content) is str
                and item.get("type", "message") == "message"
            ):
                item["content"] = content
            else:
                _fill(item, content)
        append(item)
    return items


def item_of(entry: SessionEntry) -> dict[str, Any] | None:
    """A copy of the item an item entry holds (the caller may change it), else None.

    A message entry without item data (the first half of a pre-version-7 item) is none."""
    if entry.custom_type != ITEM_TYPE or entry.data is None:
        return None
    return item_of_data(entry.data, entry.message)


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
