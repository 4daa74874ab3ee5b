"""Exact-value secret redaction, shared by render, recall, workers and commands.

Each known secret value is replaced wherever it occurs, longest first, in one pass, so a
secret that contains a shorter one is replaced whole and a replacement marker is never
rescanned. Empty secrets are ignored (they would match everywhere). A secret that is a
substring of the marker itself cannot be removed from output that shows a marker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final, TypeVar

from ..errors import InvalidInputError

__all__ = ["REDACTION_MARKER", "Redactor", "redact_text", "redact_value", "redactor"]

REDACTION_MARKER: Final = "[REDACTED]"

_T = TypeVar("_T")


class Redactor:
    """Replaces a fixed set of exact secret values; build once, apply to many strings."""

    __slots__ = ("_pattern", "secrets")

    def __init__(self, secrets: Iterable[str] | None = None) -> None:
        if isinstance(secrets, str | bytes):
            # Iterating one string would redact each of its characters.
            raise InvalidInputError("secrets must be a collection of strings, not one string")
        unique: set[str] = set()
        for secret in secrets or ():
            if not isinstance(secret, str):
                raise InvalidInputError(f"a secret must be a string, got {type(secret).__name__}")
            if secret:
                unique.add(secret)
        # Longest first: the regex alternation takes the first branch that matches.
        self.secrets: tuple[str, ...] = tuple(sorted(unique, key=lambda s: (-len(s), s)))
        self._pattern = (
            re.compile("|".join(re.escape(s) for s in self.secrets)) if self.secrets else None
        )

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by the marker."""
        if self._pattern is None or not value:
            return value
        return self._pattern.sub(REDACTION_MARKER, value)

    def value(self, value: _T) -> _T:
        """A JSON-like value with every string (dict keys included) redacted; a new copy."""
        if self._pattern is None:
            return value
        return self._walk(value)  # type: ignore[no-any-return]

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                (self.text(k) if isinstance(k, str) else k): self._walk(v) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return type(value)(self._walk(v) for v in value)
        return value


def redactor(secrets: Iterable[str] | Redactor | None) -> Redactor:
    """A ``Redactor`` for ``secrets``, reusing one that is already built."""
    return secrets if isinstance(secrets, Redactor) else Redactor(secrets)


def redact_text(text: str, secrets: Iterable[str] | Redactor | None) -> str:
    """``text`` with every exact secret value replaced by ``[REDACTED]``."""
    return redactor(secrets).text(text)


def redact_value(value: _T, secrets: Iterable[str] | Redactor | None) -> _T:
    """A string or JSON-like value (dicts, lists, tuples) with every secret replaced."""
    return redactor(secrets).value(value)
