"""Printing: rich tables and text for people, plain JSON for scripts (``--json``).

Transcript and memory text is untrusted: a message holding ``\\x1b[2J`` or ``\\x1b]0;...``
would clear the screen or retitle the terminal of whoever reads it. Everything printed
for a person passes through ``printable``, which shows control characters (C0 but
newline and tab, DEL, C1) and the invisible bidirectional overrides as escapes
(``\\x1b``, ``\\u202e``). JSON output needs nothing: JSON escapes them itself.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = [
    "printable",
    "clip",
    "console",
    "error_console",
    "heading",
    "one_line",
    "print_json",
    "set_width",
    "table",
]

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with terminal control characters and bidi overrides shown as escapes."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def _safe(item: Any) -> Any:
    if isinstance(item, str):
        return printable(item)
    if isinstance(item, Text) and _UNSAFE.search(item.plain):
        # Escaping lengthens the text and would misplace its spans; the style stays.
        return Text(printable(item.plain), style=item.style, end=item.end)
    return item


class _SafeConsole(Console):
    """A console whose ``print`` escapes control characters in strings and texts."""

    def print(self, *objects: Any, **options: Any) -> None:
        super().print(*(_safe(o) for o in objects), **options)


# Rich markup stays off: transcript text such as "[done]" must print as written.
_STDOUT: Console | None = None
_STDERR: Console | None = None


# Output that is not a terminal (a file, a pipe, another program) has no width to fit:
# rich would wrap it at 80 columns (or at an exported COLUMNS, which describes the
# terminal the shell had, not the pipe), cutting page text mid-line. It gets lines as
# long as their content instead; only ``--width N`` (``set_width``) asks for a width.
PIPE_WIDTH: Final = 1 << 20
_WIDTH: int | None = None


def set_width(columns: int | None) -> None:
    """Wrap every later output at ``columns`` (``--width``); None: the default rule."""
    global _WIDTH, _STDOUT, _STDERR
    if columns != _WIDTH:
        _WIDTH, _STDOUT, _STDERR = columns, None, None


def _fitted(out: Console) -> Console:
    if _WIDTH is not None:
        out.width = _WIDTH
    elif not out.is_terminal:
        out.width = PIPE_WIDTH
    return out


def console() -> Console:
    global _STDOUT
    if _STDOUT is None:
        _STDOUT = _fitted(_SafeConsole(markup=False, highlight=False, emoji=False))
    return _STDOUT


def error_console() -> Console:
    global _STDERR
    if _STDERR is None:
        _STDERR = _fitted(_SafeConsole(stderr=True, markup=False, highlight=False, emoji=False))
    return _STDERR


def print_json(data: Any) -> None:
    """One JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def one_line(text: str) -> str:
    """``text`` with its whitespace runs (newlines too) folded to single spaces."""
    return printable(" ".join(text.split()))


def clip(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = one_line(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def heading(title: str, detail: str = "") -> None:
    """A section title, as a rule across the terminal."""
    out = console()
    out.print()
    if out.width >= PIPE_WIDTH:
        out.print(Text(f"── {printable(title)}", style="bold"))  # no rule a million wide
    else:
        out.rule(Text(printable(title), style="bold"), align="left", style="dim")
    if detail:
        out.print(Text(printable(detail), style="dim"))


def table(
    columns: Sequence[str | tuple[str, Mapping[str, Any]]],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
) -> Table:
    """A rich table; a column is a name or ``(name, options for add_column)``."""
    grid = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for column in columns:
        if isinstance(column, str):
            grid.add_column(column)
        else:
            grid.add_column(column[0], **dict(column[1]))
    for row in rows:
        grid.add_row(
            *(_safe(cell) if isinstance(cell, Text) else Text(printable(str(cell))) for cell in row)
        )
    return grid
