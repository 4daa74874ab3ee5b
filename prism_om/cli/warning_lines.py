"""The library's warnings to the user, said as the CLI's own ``prism-om: warning:`` lines.

A read that skips something (``MalformedTombstoneWarning``: a tombstone record it cannot
use) warns through ``warnings``; inside a command each such warning is one line on stderr
naming what was skipped, once per command (not once per process: ``main`` may run many
times in one), never Python's ``file:line: Category: ...`` form. Other warnings are shown
as Python shows them.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from ..errors import MalformedTombstoneWarning, PrismMemoryError

__all__ = ["warning_lines"]


@contextmanager
def warning_lines() -> Iterator[None]:
    """For the duration: prism_om's warnings as ``prism-om: warning:`` lines on stderr."""
    with warnings.catch_warnings():
        # A fresh filter set: what an earlier command in this process said is said again.
        warnings.simplefilter("default", MalformedTombstoneWarning)
        shown = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if not issubclass(category, PrismMemoryError):
                shown(message, category, filename, lineno, file, line)
                return
            from .output import printable  # a message may quote a stored, untrusted value

            text = printable(" ".join(str(message).split()))
            (file or sys.stderr).write(f"prism-om: warning: {text}\n")

        warnings.showwarning = show
        yield
