"""How an error message shows a refused value: short, and never by an unbounded ``repr``."""

from __future__ import annotations

__all__ = ["shown"]

# Strings longer than this are cut to their start and a length.
_MAX_SHOWN_CHARS = 64


def shown(value: object) -> str:
    """``value`` for an error message: a short string or a number as is, else its type.

    The ``repr`` of a container could be megabytes, or recurse too deep to be built; that
    of an int of more than 4,300 digits raises. Neither belongs in a message.
    """
    if value is None or isinstance(value, bool | float):
        return repr(value)
    if isinstance(value, int):
        return repr(value) if abs(value) < 10**40 else f"an int of {value.bit_length():,} bits"
    if isinstance(value, str):
        if len(value) <= _MAX_SHOWN_CHARS:
            return repr(value)
        return f"{value[:40]!r}... ({len(value):,} characters)"
    return f"a {type(value).__name__}"
