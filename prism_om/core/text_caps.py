"""Byte sizes of text as stored and sent (UTF-8), and cutting text to a byte budget."""

from __future__ import annotations

__all__ = ["truncate_utf8", "utf8_len"]


def utf8_len(text: str) -> int:
    """Size of ``text`` in UTF-8 bytes: what the specification's KiB caps measure."""
    return len(text.encode("utf-8"))


def truncate_utf8(text: str, max_bytes: int, marker: str = "") -> str:
    """``text`` cut so that it plus ``marker`` fits ``max_bytes``; never splits a character.

    Returns ``text`` unchanged when it already fits. When even ``marker`` does not fit, the
    marker itself is cut, so the result never exceeds ``max_bytes``.
    """
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    tail = marker.encode("utf-8")
    if len(tail) >= max_bytes:
        return tail[:max_bytes].decode("utf-8", errors="ignore")
    head = data[: max_bytes - len(tail)].decode("utf-8", errors="ignore")
    return head + marker
