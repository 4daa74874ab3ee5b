"""Exact-value secret redaction, shared by render, recall, workers, commands and the CLI.

A secret is matched in every representation it takes on its way out: as written, and as
JSON or a Python ``repr`` escape it (once or twice nested), because text such as tool-call
arguments is serialised before it is rendered and a secret holding ``"`` or ``\\`` would
otherwise slip past an exact match. Every occurrence of every secret is found first, then
each run of overlapping occurrences is replaced by one marker, in one pass: a secret
overlapping another (``user-sk`` in ``user-sk-live-...``) never leaves a piece of either
behind, and a replacement marker is never rescanned. Empty secrets are ignored (they would
match everywhere). A secret that is a substring of the marker itself cannot be removed from
output that shows a marker.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final, TypeVar

from ..errors import InvalidInputError

__all__ = ["REDACTION_MARKER", "Redactor", "redact_text", "redact_value", "redactor"]

REDACTION_MARKER: Final = "[REDACTED]"

_T = TypeVar("_T")


class Redactor:
    """Replaces a fixed set of exact secret values; build once, apply to many strings."""

    __slots__ = ("_pattern", "marker", "secrets")

    def __init__(
        self, secrets: Iterable[str] | None = None, *, marker: str = REDACTION_MARKER
    ) -> None:
        self.marker = marker
        if isinstance(secrets, str | bytes):
            # Iterating one string would redact each of its characters.
            raise InvalidInputError("secrets must be a collection of strings, not one string")
        unique: set[str] = set()
        for secret in secrets or ():
            if not isinstance(secret, str):
                raise InvalidInputError(f"a secret must be a string, got {type(secret).__name__}")
            if secret:
                unique.add(secret)
        self.secrets: tuple[str, ...] = tuple(sorted(unique, key=lambda s: (-len(s), s)))
        forms = {form for secret in self.secrets for form in _representations(secret)}
        # Longest first: at one position the alternation takes the first branch that
        # matches, so the longest secret starting there wins.
        alternation = "|".join(re.escape(f) for f in sorted(forms, key=lambda f: (-len(f), f)))
        self._pattern = re.compile(alternation) if forms else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by the marker."""
        pattern = self._pattern
        if pattern is None or not value:
            return value
        match = pattern.search(value)
        if match is None:
            return value
        pieces: list[str] = []
        done = 0  # everything before this index is already emitted
        span_start, span_end = match.start(), match.end()
        while True:
            # Searching again one character on finds any occurrence that starts inside
            # the current run (the leftmost first, the longest at its position).
            match = pattern.search(value, match.start() + 1)
            if match is not None and match.start() < span_end:
                span_end = max(span_end, match.end())
                continue
            pieces.append(value[done:span_start])
            pieces.append(self.marker)
            done = span_end
            if match is None:
                break
            span_start, span_end = match.start(), match.end()
        pieces.append(value[done:])
        return "".join(pieces)

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


def _representations(secret: str) -> set[str]:
    """``secret`` as written and as JSON and ``repr`` escape it, once and twice nested."""
    once = {
        secret,
        json.dumps(secret, ensure_ascii=False)[1:-1],
        json.dumps(secret)[1:-1],
        repr(secret)[1:-1],
    }
    twice = {json.dumps(form, ensure_ascii=False)[1:-1] for form in once}
    twice |= {json.dumps(form)[1:-1] for form in once}
    return {form for form in once | twice if form}


def redactor(secrets: Iterable[str] | Redactor | None) -> Redactor:
    """A ``Redactor`` for ``secrets``, reusing one that is already built."""
    return secrets if isinstance(secrets, Redactor) else Redactor(secrets)


def redact_text(text: str, secrets: Iterable[str] | Redactor | None) -> str:
    """``text`` with every exact secret value replaced by ``[REDACTED]``."""
    return redactor(secrets).text(text)


def redact_value(value: _T, secrets: Iterable[str] | Redactor | None) -> _T:
    """A string or JSON-like value (dicts, lists, tuples) with every secret replaced."""
    return redactor(secrets).value(value)
