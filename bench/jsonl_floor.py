"""The JSONL reopen floor: read the session file and ``json.loads`` each line.

That is the least any reopen of a JSONL session must do (the store also validates each
line into an entry and indexes the tree). It is timed right after the store's own
``cold_start`` at the same size, with the same ``Timer``, so their ratio is taken side by
side; the collector is left as Python runs it, as a caller's own loop would.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final

from .data import SESSION_ID
from .model import Result
from .timing import Timer, sync

__all__ = ["JSONL_FLOOR", "run_jsonl_reopen_floor"]

JSONL_FLOOR: Final = "floor (json.loads)"


async def run_jsonl_reopen_floor(directory: str, size: int, timer: Timer) -> Result:
    """``cold_start`` of the JSONL floor: the session file read, each line parsed."""
    path = os.path.join(directory, SESSION_ID + ".jsonl")

    def reopen() -> list[Any]:
        with open(path, "rb") as f:
            data = f.read()
        return [json.loads(line) for line in data.splitlines()]

    return Result(
        "cold_start",
        JSONL_FLOOR,
        size,
        await timer.measure(sync(reopen)),
        note="read the file + json.loads of each line",
    )
