"""Telling the three formats apart from the records themselves, never from the file name.

Each of the first records votes: ``native`` for a ``SessionEntry`` wire dict (``id``,
``sessionId``, ``kind``), ``pi`` for a ``type`` pi writes (a ``session`` header first settles
it), ``openai`` for a top-level ``role``. Records that match nothing do not vote; the
parser reports them with their line. No vote, or two different votes, is an
``ImportFormatError`` that asks for ``--format``.
"""

from __future__ import annotations

from typing import Any, Literal

from ..errors import InvalidInputError
from .native import looks_native
from .pi_session import PI_ENTRY_TYPES
from .source import Source

__all__ = ["FORMATS", "Format", "detect_format", "normalise_format"]

Format = Literal["openai", "pi", "native"]
FORMATS: tuple[Format, ...] = ("openai", "pi", "native")
_ALIASES: dict[str, Format] = {
    "openai": "openai",
    "openai-chat": "openai",
    "chat": "openai",
    "pi": "pi",
    "pi-session": "pi",
    "native": "native",
    "prism": "native",
    "prism-om": "native",
}
# Enough records to see past a few odd lines, few enough to stay instant on huge files.
_VOTERS = 50
_HINT = "pass --format openai, pi or native"


def normalise_format(name: str) -> Format:
    """The canonical format for a user-given name, raising ``InvalidInputError`` for others."""
    try:
        return _ALIASES[name.strip().lower()]
    except KeyError:
        raise InvalidInputError(
            f"unknown import format {name!r}: use openai, pi or native"
        ) from None


def _vote(data: dict[str, Any]) -> Format | None:
    if looks_native(data):
        return "native"
    if isinstance(data.get("type"), str) and data["type"] in PI_ENTRY_TYPES and "role" not in data:
        return "pi"
    if isinstance(data.get("role"), str):
        return "openai"
    return None


def detect_format(source: Source) -> Format:
    """The format of a read file, raising ``ImportFormatError`` when it cannot tell."""
    if source.layout == "object":
        return "openai"
    first = source.records[0]
    if first.data.get("type") == "session" and "sessionId" not in first.data:
        return "pi"
    votes: dict[Format, int] = {}
    for record in source.records[:_VOTERS]:
        vote = _vote(record.data)
        if vote is not None:
            votes.setdefault(vote, record.pos)
    if len(votes) == 1:
        return next(iter(votes))
    if not votes:
        raise source.error(
            None,
            "not a known transcript shape: no record looks like a chat message ('role'), a pi "
            f"session entry ('type') or a prism-om entry ('id', 'sessionId', 'kind'); {_HINT}",
        )
    seen = ", ".join(f"{name} at {source.where(pos)}" for name, pos in sorted(votes.items()))
    raise source.error(None, f"ambiguous format: records look like {seen}; {_HINT}")
