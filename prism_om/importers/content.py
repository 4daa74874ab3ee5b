"""Content and tool-call conversions shared by the chat formats.

Our content parts are text, image and thinking. A part of another kind (audio, a file...)
becomes a text part naming it, ``"[input_audio content part not imported]"``, so a reader
sees that something was there rather than a silent gap.
"""

from __future__ import annotations

import json
from typing import Any

from ..entries import find_too_deep

__all__ = ["parse_arguments", "placeholder_part", "text_part"]


def text_part(text: str) -> dict[str, Any]:
    """A wire text part."""
    return {"type": "text", "text": text}


def placeholder_part(kind: object) -> dict[str, Any]:
    """A text part standing in for a content part we have no shape for."""
    label = kind if isinstance(kind, str) and kind else "unknown"
    return text_part(f"[{label} content part not imported]")


def parse_arguments(value: object) -> dict[str, Any]:
    """Tool-call arguments as a dict: JSON text is parsed; anything else is kept raw.

    Arguments that are not a JSON object (truncated model output, a bare string) are kept
    whole under ``{"_raw": ...}`` rather than dropped or rejected.
    """
    if isinstance(value, dict):
        return value
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return {"_raw": value}
        # Nested deeper than an entry may hold: kept whole as text too.
        if not isinstance(parsed, dict) or find_too_deep(parsed) is not None:
            return {"_raw": value}
        return parsed
    return {"_raw": value}
