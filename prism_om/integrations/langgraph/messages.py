"""LangChain messages <-> stored records (``prism_om.integrations.conversation``).

Each message is stored verbatim (``message_to_dict``, as JSON gives it back), so reading it
gives back the message as it was given. A message with a conversational meaning is also
written as a prism-om message entry, which the observer reads and recall cites:

=====================  ==========================================================
LangChain message      message entry
=====================  ==========================================================
``HumanMessage``       user message (text blocks kept, other blocks as ``[<type>]``)
``AIMessage``          assistant message: its text, and each tool call with an id
                       as a tool call (``id``, ``name``, ``args``)
``ToolMessage``        tool message answering ``tool_call_id``
``ChatMessage``        user or assistant message when its role is one of those
anything else          none: ``SystemMessage``, ``FunctionMessage``, ... are only
                       the stored record
=====================  ==========================================================
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Final

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from ...errors import InvalidInputError
from ..conversation import Record, StoredRecord, json_value

__all__ = [
    "RECORD_TYPE",
    "ROOT_TYPE",
    "key_of",
    "message_of",
    "record_of",
    "withheld",
    "without_results",
]

RECORD_TYPE: Final = "langchain.message"
ROOT_TYPE: Final = "langchain.session"


def _text(content: object) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        else:
            kind = block.get("type") if isinstance(block, dict) else None
            # An image, file or audio block: the reader sees that one was there.
            parts.append({"type": "text", "text": f"[{kind if isinstance(kind, str) else 'part'}]"})
    return parts


def _dump(message: BaseMessage, index: int) -> dict[str, Any]:
    if not isinstance(message, BaseMessage):
        raise InvalidInputError(
            f"message {index} must be a LangChain BaseMessage, got {type(message).__name__}"
        )
    dumped: dict[str, Any] = json_value(message_to_dict(message), f"message {index}")
    return dumped


def key_of(message: BaseMessage, index: int = 0) -> str:
    """What identifies ``message`` across calls: its id, else a digest of its content (a
    graph's ``add_messages`` gives every message an id)."""
    if isinstance(message, BaseMessage) and message.id:
        return f"id:{message.id}"
    text = json.dumps(_dump(message, index), sort_keys=True, separators=(",", ":"))
    return "digest:" + hashlib.sha256(text.encode()).hexdigest()


def record_of(message: BaseMessage, index: int, *, keyed: bool = True) -> Record:
    """The record storing ``message`` (``index`` names it in errors)."""
    dumped = _dump(message, index)
    entries: list[dict[str, Any]] = []
    kind = message.type
    role = getattr(message, "role", None) if kind == "chat" else None
    if kind == "human" or role == "user":
        entries.append({"role": "user", "content": _text(message.content)})
    elif kind in ("ai", "AIMessageChunk") or role == "assistant":
        calls = [
            {"id": c["id"], "name": c["name"], "arguments": dict(c.get("args") or {})}
            for c in getattr(message, "tool_calls", None) or ()
            if c.get("id") and c.get("name")
        ]
        fields: dict[str, Any] = {"role": "assistant", "content": _text(message.content)}
        if calls:
            fields["tool_calls"] = calls
        entries.append(fields)
    elif kind in ("tool", "ToolMessageChunk"):
        call_id = getattr(message, "tool_call_id", None)
        if not call_id:
            raise InvalidInputError(f"message {index}: a ToolMessage needs a tool_call_id")
        entries.append({"role": "tool", "content": _text(message.content), "tool_call_id": call_id})
    return Record(dumped, entries, key_of(message, index) if keyed else None)


def message_of(record: StoredRecord) -> BaseMessage:
    """The message a record stores (withheld when revoked)."""
    (message,) = messages_from_dict([record.message])
    return withheld(message, record.shown_id) if record.revoked else message


def withheld(message: BaseMessage, entry_id: str) -> BaseMessage:
    """What a revoked message reads as: its type, id and call ids, no text.

    An ``AIMessage`` keeps its tool calls' ids and names (arguments emptied), so the
    ``ToolMessage`` answering one still has its call; a ``ToolMessage`` keeps its
    ``tool_call_id``. Provider metadata (which may repeat the text) is dropped.
    """
    marker = f"[revoked] {entry_id}"
    if isinstance(message, AIMessage):
        calls: list[Any] = [
            {"id": c["id"], "name": c["name"], "args": {}} for c in message.tool_calls
        ]
        return AIMessage(content=marker, id=message.id, tool_calls=calls)
    if isinstance(message, ToolMessage):
        return ToolMessage(content=marker, id=message.id, tool_call_id=message.tool_call_id)
    # Any other type keeps its own fields (a ChatMessage its role, ...), not its text.
    empty: dict[str, Any] = {"content": marker, "additional_kwargs": {}, "response_metadata": {}}
    return message.model_copy(update=empty)


def without_results(messages: Sequence[BaseMessage], call_ids: frozenset[str]) -> list[BaseMessage]:
    """``messages`` without the ``ToolMessage``s answering ``call_ids`` (calls never seen)."""
    return [m for m in messages if not (isinstance(m, ToolMessage) and m.tool_call_id in call_ids)]
