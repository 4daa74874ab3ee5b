"""The errors an import raises; both are ``InvalidInputError``, so nothing is ever written."""

from __future__ import annotations

from ..errors import InvalidInputError

__all__ = ["ImportFormatError", "SessionExistsError"]


class ImportFormatError(InvalidInputError):
    """A file that is not a transcript of the expected format.

    ``str(error)`` reads ``"<file>: line 7: <reason>"`` for JSON lines, ``"<file>: index 3:
    <reason>"`` for an item of a JSON array, or ``"<file>: <reason>"`` for the file as a
    whole. The parts are kept as attributes for callers that render their own message.
    """

    def __init__(
        self,
        file: str,
        reason: str,
        *,
        line: int | None = None,
        index: int | None = None,
    ) -> None:
        self.file = file
        self.reason = reason
        self.line = line
        self.index = index
        if line is not None:
            where = f"{file}: line {line}"
        elif index is not None:
            where = f"{file}: index {index}"
        else:
            where = file
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only attributes would otherwise be lost when the error is pickled.
        return (_rebuild, (self.file, self.reason, self.line, self.index))


def _rebuild(file: str, reason: str, line: int | None, index: int | None) -> ImportFormatError:
    return ImportFormatError(file, reason, line=line, index=index)


class SessionExistsError(InvalidInputError):
    """An explicitly named target session that already has entries: an import never mixes."""
