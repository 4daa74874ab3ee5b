"""Exact-value secret redaction, shared by render, recall, workers, commands and the CLI.

A secret is matched in every representation it takes on its way out: as written, and as
JSON or a Python ``repr`` escape it, nested up to ``MAX_ESCAPE_LEVELS`` times, because text
such as tool-call arguments (JSON holding JSON ...) is serialised before it is rendered and a
secret holding ``"`` or ``\\`` would otherwise slip past an exact match. Entries are best
redacted structurally before they are serialised (``redacted_entry_text``), which spends one
level less. Every occurrence of every secret is found first, then
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

from ..entries import Message, SessionEntry, entry_text, message_text
from ..errors import InvalidInputError

__all__ = [
    "MAX_ESCAPE_LEVELS",
    "REDACTION_MARKER",
    "Redactor",
    "redact_text",
    "redact_value",
    "redacted_entry_text",
    "redacted_message_text",
    "redactor",
]

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


MAX_ESCAPE_LEVELS: Final = 6
"""How many nested JSON escapings of a secret are matched (a tool argument holding JSON
holding JSON ...); each level doubles a secret's backslashes, so deeper levels are both
rare and long."""


def _representations(secret: str) -> set[str]:
    """``secret`` as written, as ``repr`` shows it, and as JSON escapes either, nested.

    ``repr`` only shows the raw value (a Python log line); every further level is JSON
    (ASCII-only or not) escaping the level below, the way a tool argument holds JSON text.
    Escaping stops early once a level adds nothing new, so a secret with nothing to escape
    costs one form.
    """
    forms = {secret, repr(secret)[1:-1]}
    level = set(forms)
    for _ in range(MAX_ESCAPE_LEVELS):
        escaped: set[str] = set()
        for form in level:
            escaped.add(json.dumps(form, ensure_ascii=False)[1:-1])
            escaped.add(json.dumps(form)[1:-1])
        level = escaped - forms
        if not level:
            break
        forms |= level
    return {form for form in forms if form}


_NO_SECRETS: Final = Redactor()


_RECENT_MAX: Final = 16
"""Redactors ``redactor`` keeps for the secret sets it was given last (oldest dropped)."""

_recent: dict[frozenset[str], Redactor] = {}


def redactor(secrets: Iterable[str] | Redactor | None) -> Redactor:
    """A ``Redactor`` for ``secrets``, reusing one that is already built.

    A collection of strings passed again (an agent's secrets, on every recall and page)
    gets the redactor built for the same set the first time: building one escapes each
    secret at every level, many times the cost of the recall it serves.
    """
    if secrets is None:
        # The common case, once per recall and per page: no pattern to build.
        return _NO_SECRETS
    if isinstance(secrets, Redactor):
        return secrets
    if not isinstance(secrets, list | tuple | set | frozenset) or not all(
        type(s) is str for s in secrets
    ):
        return Redactor(secrets)  # an iterator, or a value Redactor refuses
    key = frozenset(secrets)
    built = _recent.pop(key, None)
    if built is None:
        built = Redactor(key)
        if len(_recent) >= _RECENT_MAX:
            # Tolerant of a thread that evicts at the same time.
            _recent.pop(next(iter(_recent), frozenset()), None)
    _recent[key] = built  # the most recently used last
    return built


def redact_text(text: str, secrets: Iterable[str] | Redactor | None) -> str:
    """``text`` with every exact secret value replaced by ``[REDACTED]``."""
    return redactor(secrets).text(text)


def redact_value(value: _T, secrets: Iterable[str] | Redactor | None) -> _T:
    """A string or JSON-like value (dicts, lists, tuples) with every secret replaced."""
    return redactor(secrets).value(value)


def redacted_message_text(message: Message, secrets: Iterable[str] | Redactor | None) -> str:
    """``redacted_entry_text`` of a message entry, from its message alone."""
    red = redactor(secrets)
    if not red:
        return message_text(message)
    if message.tool_calls:
        calls = [
            c.model_copy(update={"arguments": red.value(c.arguments)}) for c in message.tool_calls
        ]
        message = message.model_copy(update={"tool_calls": calls})
    return red.text(message_text(message))


def redacted_entry_text(entry: SessionEntry, secrets: Iterable[str] | Redactor | None) -> str:
    """``entry_text(entry)`` with every secret replaced, redacting structure first.

    Tool-call arguments and custom data are redacted as values before they are serialised:
    serialising first would escape a secret nested inside them once more, and a secret
    already at the deepest level matched would slip out one level beyond it.
    """
    red = redactor(secrets)
    if not red:
        return entry_text(entry)
    message = entry.message
    if message is not None:
        return redacted_message_text(message, red)
    if entry.data:
        entry = entry.model_copy(update={"data": red.value(entry.data)})
    return red.text(entry_text(entry))
