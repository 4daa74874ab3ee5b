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

A URL's password is the other kind of secret, found by its place rather than its value:
``hide_url_password`` (one URL) and ``hide_url_passwords`` (every URL in a text) replace
it with ``***``, wherever the URL is shown (a store's ``url``, an error, a hint, a log
line); ``url_passwords`` gives the values themselves, for text that quotes one outside a
URL (a driver's message about a malformed password).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final, TypeVar
from urllib.parse import unquote, unquote_plus

from ..entries import Message, SessionEntry, entry_text, message_text
from ..errors import InvalidInputError

__all__ = [
    "MAX_ESCAPE_LEVELS",
    "REDACTION_MARKER",
    "Redactor",
    "URL_PASSWORD_MARKER",
    "hide_url_password",
    "hide_url_passwords",
    "redact_error",
    "redact_text",
    "redact_value",
    "redacted_entry_text",
    "redacted_message_text",
    "redactor",
    "url_passwords",
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
        # Every refusal names ``secrets``: the argument of every public call that takes
        # secrets (a store's search, recall, pages) and is handed on to here as it is.
        if isinstance(secrets, str | bytes):
            # Iterating one string would redact each of its characters.
            raise InvalidInputError(
                "secrets must be a collection of strings, not one string", field="secrets"
            )
        if secrets is not None and not isinstance(secrets, Iterable):
            # Refused here, not by the loop below as a bare TypeError.
            raise InvalidInputError(
                f"secrets must be a collection of strings, got {type(secrets).__name__}",
                field="secrets",
            )
        unique: set[str] = set()
        for secret in secrets or ():
            if not isinstance(secret, str):
                raise InvalidInputError(
                    f"a secret must be a string, got {type(secret).__name__}", field="secrets"
                )
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


def redact_error(exc: BaseException, secrets: Iterable[str] | Redactor | None) -> BaseException:
    """``exc`` with every secret replaced in its message (its string ``args``), in place,
    type and attributes kept; returns it. For an error whose message is shown to someone
    (a model, a client) and may quote an argument it was given."""
    red = redactor(secrets)
    if red:
        exc.args = tuple(red.text(a) if isinstance(a, str) else a for a in exc.args)
    return exc


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


# -- URL passwords -----------------------------------------------------------------------

URL_PASSWORD_MARKER: Final = "***"

# Query options (libpq's connection keywords) whose values are secrets.
_SECRET_OPTIONS: Final = frozenset({"password", "sslpassword"})
_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")
# libpq's key=value form ("host=h password=pw"), in a message that quotes one.
_KEYWORD_PASSWORD = re.compile(
    r"(?i)(?<![\w%])((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&'\"]+)"
)


def _userinfo_password(rest: str) -> tuple[int, int] | None:
    """Where the password of ``user:password@host...`` (a URL past ``scheme://``) lies.

    The userinfo ends at the last ``@`` before the first ``/``: libpq and ``urlsplit``
    disagree about a raw ``@``, ``?`` or ``#`` in a password, and hiding up to the last
    ``@`` covers both readings.
    """
    authority = rest.split("/", 1)[0]
    at = authority.rfind("@")
    colon = authority.find(":", 0, at)
    if at < 0 or colon < 0:
        return None  # no userinfo, or a user without a password
    return colon + 1, at


def _hidden(url: str) -> str:
    """One URL (``url`` starts with ``scheme://``) with its password and secret options
    replaced by the marker."""
    start = _URL_START.match(url)
    assert start is not None
    head, rest = url[: start.end()], url[start.end() :]
    span = _userinfo_password(rest)
    if span is not None:
        rest = rest[: span[0]] + URL_PASSWORD_MARKER + rest[span[1] :]
    path, mark, query = rest.partition("?")
    if mark:
        pieces = []
        for piece in query.split("&"):
            key, equals, _ = piece.partition("=")
            if equals and unquote_plus(key).strip().lower() in _SECRET_OPTIONS:
                piece = f"{key}={URL_PASSWORD_MARKER}"
            pieces.append(piece)
        rest = path + mark + "&".join(pieces)
    return head + rest


def hide_url_password(url: str) -> str:
    """``url`` (a whole URL, spaces and all) with any password shown as ``***``: the one
    in its userinfo and those of ``password=``/``sslpassword=`` options. Text that is
    not a ``scheme://`` URL is returned unchanged."""
    if not isinstance(url, str) or _URL_START.match(url) is None:
        return url
    return _hidden(url)


def hide_url_passwords(text: str) -> str:
    """``text`` with the password of every URL in it (a run of non-space characters
    starting ``scheme://``) and of every ``password=`` keyword shown as ``***``."""
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda m: _hidden(m.group()), text)
    if "assword" in text.lower():
        text = _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + URL_PASSWORD_MARKER, text)
    return text


def url_passwords(url: str) -> tuple[str, ...]:
    """The passwords ``url`` carries, as written and percent-decoded (none when it is not a
    ``scheme://`` URL): for redacting a message that quotes one outside the URL."""
    start = _URL_START.match(url) if isinstance(url, str) else None
    if start is None:
        return ()
    rest = url[start.end() :]
    found: list[str] = []
    span = _userinfo_password(rest)
    if span is not None:
        found.append(rest[span[0] : span[1]])
    _, mark, query = rest.partition("?")
    for piece in query.split("&") if mark else ():
        key, equals, value = piece.partition("=")
        if equals and unquote_plus(key).strip().lower() in _SECRET_OPTIONS:
            found.append(value)
    forms = {form for value in found for form in (value, unquote(value), unquote_plus(value))}
    return tuple(sorted(form for form in forms if form))
