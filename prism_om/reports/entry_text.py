"""A wire entry's text as the surfaces show it: its content, then its tool calls."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["call_arguments", "wire_text"]


def wire_text(wire: Mapping[str, Any], *, arguments: bool = False) -> str:
    """A wire entry's text; its tool calls as ``name(…)``, or with their ``arguments``."""
    message = wire.get("message")
    if isinstance(message, Mapping):
        content = message.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        else:
            text = ""
        calls = message.get("toolCalls") or []
        names = [
            f"{c.get('name')}({call_arguments(c) if arguments else '…'})"
            for c in calls
            if isinstance(c, Mapping)
        ]
        return " ".join([text, *names]).strip()
    return str(wire.get("summary") or wire.get("data") or "")


def call_arguments(call: Mapping[str, Any]) -> str:
    """A tool call's arguments as the model wrote them (a JSON string, or an object)."""
    value = call.get("arguments")
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
