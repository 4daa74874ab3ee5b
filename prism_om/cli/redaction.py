"""``--secret`` and ``PRISM_SECRETS``: the exact values a printing command redacts.

``PRISM_SECRETS`` holds one secret per line (newlines separate them because a secret may
contain a comma, a space or a quote; a trailing carriage return is dropped, blank lines
are ignored, other spaces are part of the secret). ``--secret VALUE`` adds one more and
may be repeated. Prefer the variable: a command line is visible to other users of the
machine while the command runs.

Everything a command writes to stderr (its error line, warnings, a server's log lines and
tracebacks, ``--debug``'s traceback) passes ``redacting_stderr``: an error message can quote
an entry's field, and a damaged field can hold a secret. The same stream hides the password
of every URL in a line (``hide_url_passwords``), secrets given or not.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, TextIO
from urllib.parse import quote, quote_plus

from ..core.redaction import Redactor, hide_url_passwords
from ..entries import find_lone_surrogate
from .common import CliUsageError

__all__ = [
    "SECRETS_ENV",
    "SECRETS_HELP",
    "RedactingStream",
    "add_secret_option",
    "cli_redactor",
    "cli_secrets",
    "log_redactor",
    "redacting_stderr",
    "secret_argument",
]

SECRETS_ENV: Final = "PRISM_SECRETS"
SECRETS_HELP: Final = (
    f"redact VALUE from everything printed (repeatable); ${SECRETS_ENV} adds one secret "
    "per line and keeps them off the command line"
)


# Neither message quotes the value: it is a secret, and nothing redacts it yet.
_NOT_UTF8: Final = (
    "a secret must be UTF-8 text; this one holds a byte that is not (its value is not shown)"
)


def add_secret_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--secret VALUE`` (repeatable) to ``parser``."""
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        type=secret_argument,
        metavar="VALUE",
        help=SECRETS_HELP,
    )


def secret_argument(text: str) -> str:
    """An argparse type: a ``--secret`` value, refused when it is not UTF-8.

    A byte that is not UTF-8 reaches Python as a lone surrogate, which no redactor of
    encoded text (a URL-quoted log line) can match: refused as a usage error up front.
    """
    if find_lone_surrogate(text) is not None:
        raise argparse.ArgumentTypeError(_NOT_UTF8)
    return text


def cli_secrets(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> list[str]:
    """The secrets of one command: ``--secret`` values, then ``PRISM_SECRETS`` lines.

    ``CliUsageError`` for a line of the variable that is not UTF-8 (``--secret`` values
    are refused by ``secret_argument`` as the command line is parsed).
    """
    given = [s for s in getattr(args, "secret", None) or () if s.strip()]
    raw = (environ if environ is not None else os.environ).get(SECRETS_ENV, "")
    lines = [line.removesuffix("\r") for line in raw.split("\n")]
    for number, line in enumerate(lines, 1):
        if find_lone_surrogate(line) is not None:
            raise CliUsageError(f"{SECRETS_ENV} line {number}: {_NOT_UTF8}", field=SECRETS_ENV)
    # A blank line would match every run of spaces: almost certainly not a secret.
    return given + [line for line in lines if line.strip()]


def cli_redactor(args: argparse.Namespace) -> Redactor:
    """A ``Redactor`` for the command's secrets (an empty one redacts nothing)."""
    return Redactor(cli_secrets(args))


def log_redactor(secrets: Iterable[str]) -> Redactor:
    """A ``Redactor`` for log lines: each secret also as a URL quotes it (a request path)."""
    forms: set[str] = set()
    for secret in secrets:
        forms.update({secret, quote(secret, safe=""), quote(secret), quote_plus(secret)})
    return Redactor(forms)


class RedactingStream:
    """A text stream that redacts each whole line before passing it on: the secrets of
    ``redactor``, and the password of every URL.

    Text is held until its line ends (or ``flush``), so a secret written in two pieces is
    still seen whole; everything else (``fileno``, ``isatty``, ``encoding``) is the
    wrapped stream's.
    """

    def __init__(self, stream: TextIO, redactor: Redactor) -> None:
        self._stream = stream
        self._redactor = redactor
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        done, newline, rest = self._pending.rpartition("\n")
        if newline:
            self._stream.write(self._redacted(done + newline))
            self._pending = rest
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            self._stream.write(self._redacted(self._pending))
            self._pending = ""
        self._stream.flush()

    def _redacted(self, text: str) -> str:
        return hide_url_passwords(self._redactor.text(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def redacting_stderr(secrets: Iterable[str]) -> Iterator[None]:
    """``sys.stderr`` redacting ``secrets`` and URL passwords for the duration.

    Installed before a command starts, so loggers it configures (uvicorn's, the MCP SDK's)
    write through it too.
    """
    red = log_redactor(secrets)
    original = sys.stderr
    wrapped = RedactingStream(original, red)
    sys.stderr = wrapped
    try:
        yield
    finally:
        wrapped.flush()
        if sys.stderr is wrapped:
            sys.stderr = original
