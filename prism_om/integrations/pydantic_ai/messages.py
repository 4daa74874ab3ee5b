"""PydanticAI messages <-> stored records (``prism_om.integrations.conversation``).

Each ``ModelMessage`` is stored verbatim (``ModelMessagesTypeAdapter``'s JSON), so reading
it back gives the message as it was given. Its parts with a conversational meaning are
also written as prism-om message entries, which the observer reads and recall cites:

==============================  ======================================================
part                            message entry
==============================  ======================================================
``UserPromptPart``              user message (text kept, other content as ``[<kind>]``)
``ToolReturnPart`` (any request  tool message answering ``tool_call_id`` (its
part with a ``tool_call_id``)   ``model_response_str()``)
``ModelResponse``               one assistant message: its ``TextPart``s' text and each
                                ``ToolCallPart`` as a tool call (``tool_call_id``,
                                ``tool_name``, ``args_as_dict()``)
anything else                   none: ``SystemPromptPart``, thinking, provider-native
                                tool parts, ... are only the stored record
==============================  ======================================================
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any, Final

from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ...errors import InvalidInputError
from ..conversation import Record, StoredRecord, json_value

__all__ = [
    "MEMORY_MARKER",
    "RECORD_TYPE",
    "ROOT_TYPE",
    "is_memory",
    "key_of",
    "memory_message",
    "message_of",
    "record_of",
    "without_results",
]

RECORD_TYPE: Final = "pydantic-ai.message"
ROOT_TYPE: Final = "pydantic-ai.session"
MEMORY_MARKER: Final = {"prism_om": "memory"}
"""The ``metadata`` of the part carrying the memory (never sent to the model): the
processor knows its own message again and never stores it."""


def _dump(message: ModelMessage, index: int) -> dict[str, Any]:
    if not isinstance(message, ModelRequest | ModelResponse):
        raise InvalidInputError(
            f"message {index} must be a PydanticAI ModelRequest or ModelResponse, "
            f"got {type(message).__name__}"
        )
    (dumped,) = ModelMessagesTypeAdapter.dump_python([message], mode="json")
    value: dict[str, Any] = json_value(dumped, f"message {index}")
    return value


def key_of(message: ModelMessage, index: int = 0) -> str:
    """A digest of the message's JSON (its timestamps and run id make it unique)."""
    text = json.dumps(_dump(message, index), sort_keys=True, separators=(",", ":"))
    return "digest:" + hashlib.sha256(text.encode()).hexdigest()


def is_memory(message: ModelMessage) -> bool:
    """Whether ``message`` is the memory message a processor handed the model."""
    return isinstance(message, ModelRequest) and any(
        isinstance(p, CompactionPart) and p.metadata == MEMORY_MARKER for p in message.parts
    )


def _user_text(content: object) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for item in content if isinstance(content, Sequence) else [content]:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        else:
            # An image, audio or document: the reader sees that one was there.
            kind = getattr(item, "kind", None)
            parts.append({"type": "text", "text": f"[{kind if isinstance(kind, str) else 'part'}]"})
    return parts


def _result_text(part: Any) -> str:
    for method in ("model_response_str", "model_response"):
        render = getattr(part, method, None)
        if callable(render):
            return str(render())
    return str(getattr(part, "content", ""))


def _is_call(part: Any) -> bool:
    # Provider-native calls (builtin-*) are answered inside the response by the provider.
    kind = str(getattr(part, "part_kind", ""))
    return kind.endswith("-call") and not kind.startswith("builtin-") and _call_id(part) != ""


def _call_id(part: Any) -> str:
    value = getattr(part, "tool_call_id", None)
    return value if isinstance(value, str) else ""


def record_of(message: ModelMessage, index: int) -> Record:
    """The record storing ``message`` (``index`` names it in errors)."""
    dumped = _dump(message, index)
    entries: list[dict[str, Any]] = []
    if isinstance(message, ModelRequest):
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                entries.append({"role": "user", "content": _user_text(part.content)})
            elif not isinstance(part, SystemPromptPart) and _call_id(part):
                entries.append(
                    {"role": "tool", "content": _result_text(part), "tool_call_id": _call_id(part)}
                )
    else:
        text = "\n".join(p.content for p in message.parts if isinstance(p, TextPart))
        calls = [
            {
                "id": _call_id(p),
                "name": str(getattr(p, "tool_name", "") or "tool"),
                "arguments": p.args_as_dict() if isinstance(p, ToolCallPart) else {},
            }
            for p in message.parts
            if _is_call(p)
        ]
        if text or calls:
            fields: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                fields["tool_calls"] = calls
            entries.append(fields)
    return Record(dumped, entries, key_of(message, index))


def message_of(record: StoredRecord) -> ModelMessage:
    """The message a record stores (withheld when revoked)."""
    (message,) = ModelMessagesTypeAdapter.validate_python([record.message])
    return _withheld(message, record.shown_id) if record.revoked else message


def _withheld(message: ModelMessage, entry_id: str) -> ModelMessage:
    """A revoked message: its parts' kinds, call ids and tool names, no text.

    System prompts (the developer's, never a message entry) are kept; thinking and other
    parts that may repeat the text are dropped."""
    marker = f"[revoked] {entry_id}"
    parts: list[Any] = []
    for part in message.parts:
        kept: Any = part  # replaced field by field below: the part's own dataclass
        kind = type(part)
        if kind is SystemPromptPart:
            parts.append(kept)
        elif kind is ToolCallPart:
            parts.append(dataclasses.replace(kept, args={}))
        elif kind is ToolReturnPart:
            parts.append(dataclasses.replace(kept, content=marker, metadata=None))
        elif kind in (UserPromptPart, TextPart):
            parts.append(dataclasses.replace(kept, content=marker))
        # Anything else (thinking, provider parts, search results) may repeat the text.
    if not parts:
        parts = [UserPromptPart(marker) if isinstance(message, ModelRequest) else TextPart(marker)]
    shown: Any = message
    withheld: ModelMessage = dataclasses.replace(shown, parts=parts)
    return withheld


def without_results(
    messages: Sequence[ModelMessage], call_ids: frozenset[str]
) -> list[ModelMessage]:
    """``messages`` without the request parts answering ``call_ids`` (calls never seen);
    a request left with no part goes too."""
    if not call_ids:
        return list(messages)
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            parts = [p for p in message.parts if _call_id(p) not in call_ids]
            if not parts:
                continue
            if len(parts) != len(message.parts):
                message = dataclasses.replace(message, parts=parts)
        out.append(message)
    return out


def memory_message(memory: str, system: Sequence[SystemPromptPart]) -> ModelRequest:
    """The request carrying the memory: the agent's system prompts, then the memory as a
    ``CompactionPart`` (what PydanticAI documents for an application's summary of earlier
    messages: sent as user-voice text saying another model wrote it)."""
    part = CompactionPart(content=memory, metadata=dict(MEMORY_MARKER))
    return ModelRequest(parts=[*system, part])
