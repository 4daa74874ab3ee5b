"""What a read that meets a damaged row raises: the first line of the cause, and the
error of a memory fold row that no longer parses."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pydantic import ValidationError

from ...errors import CorruptStoreError

__all__ = ["first_line", "fold_rows_parse"]


def first_line(exc: BaseException) -> str:
    """The first line of an error, or of a validation error its first problem."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{first['type']}: {first['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


@contextlib.contextmanager
def fold_rows_parse(url: str, session_id: str) -> Iterator[None]:
    """Rebuilding memory from fold rows: a row that no longer parses is a damaged store."""
    try:
        yield
    except ValidationError as exc:
        raise CorruptStoreError(
            f"{url}: a memory fold row of session {session_id!r} no longer parses "
            f"({first_line(exc)})",
            session_id=session_id,
            url=url,
        ) from exc
