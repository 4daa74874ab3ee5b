"""Printing: rich tables and text for people, plain JSON for scripts (``--json``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = [
    "clip",
    "console",
    "error_console",
    "heading",
    "one_line",
    "print_json",
    "table",
]

# Rich markup stays off: transcript text such as "[done]" must print as written.
_STDOUT: Console | None = None
_STDERR: Console | None = None


def console() -> Console:
    global _STDOUT
    if _STDOUT is None:
        _STDOUT = Console(markup=False, highlight=False, emoji=False)
    return _STDOUT


def error_console() -> Console:
    global _STDERR
    if _STDERR is None:
        _STDERR = Console(stderr=True, markup=False, highlight=False, emoji=False)
    return _STDERR


def print_json(data: Any) -> None:
    """One JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def one_line(text: str) -> str:
    """``text`` with its whitespace runs (newlines too) folded to single spaces."""
    return " ".join(text.split())


def clip(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = one_line(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def heading(title: str, detail: str = "") -> None:
    """A section title, as a rule across the terminal."""
    out = console()
    out.print()
    out.rule(Text(title, style="bold"), align="left", style="dim")
    if detail:
        out.print(Text(detail, style="dim"))


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
        grid.add_row(*(cell if isinstance(cell, Text) else Text(str(cell)) for cell in row))
    return grid
