"""``--secret`` and ``PRISM_SECRETS``: the exact values a printing command redacts.

``PRISM_SECRETS`` holds one secret per line (newlines separate them because a secret may
contain a comma, a space or a quote; a trailing carriage return is dropped, blank lines
are ignored, other spaces are part of the secret). ``--secret VALUE`` adds one more and
may be repeated. Prefer the variable: a command line is visible to other users of the
machine while the command runs.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Final

from ..core.redaction import Redactor

__all__ = ["SECRETS_ENV", "SECRETS_HELP", "add_secret_option", "cli_redactor", "cli_secrets"]

SECRETS_ENV: Final = "PRISM_SECRETS"
SECRETS_HELP: Final = (
    f"redact VALUE from everything printed (repeatable); ${SECRETS_ENV} adds one secret "
    "per line and keeps them off the command line"
)


def add_secret_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--secret VALUE`` (repeatable) to ``parser``."""
    parser.add_argument("--secret", action="append", default=[], metavar="VALUE", help=SECRETS_HELP)


def cli_secrets(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> list[str]:
    """The secrets of one command: ``--secret`` values, then ``PRISM_SECRETS`` lines."""
    given = [s for s in getattr(args, "secret", None) or () if s.strip()]
    raw = (environ if environ is not None else os.environ).get(SECRETS_ENV, "")
    lines = [line.removesuffix("\r") for line in raw.split("\n")]
    # A blank line would match every run of spaces: almost certainly not a secret.
    return given + [line for line in lines if line.strip()]


def cli_redactor(args: argparse.Namespace) -> Redactor:
    """A ``Redactor`` for the command's secrets (an empty one redacts nothing)."""
    return Redactor(cli_secrets(args))
