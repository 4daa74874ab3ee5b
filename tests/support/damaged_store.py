"""Stores damaged the way a disk or a hand edit damages them, for the error-path tests."""

from __future__ import annotations

import re
from pathlib import Path

from prism_om.stores import open_store
from support.inspect_store import fill_store

TIMESTAMP_SECRET = "sk-live-ABCDEFGH12345678"
"""A secret exactly as long as an ISO timestamp (``2026-11-30T16:08:58.944Z``)."""


async def filled_store(kind: str, root: Path) -> str:
    """A store filled by ``fill_store`` (sessions ``demo`` and ``other-session``); its URL."""
    url = f"sqlite:{root / 'store.db'}" if kind == "sqlite" else f"jsonl:{root / 'store'}"
    async with await open_store(url, create=True) as store:
        await fill_store(store)
    return url


def damage_jsonl_line(directory: Path, session_id: str, number: int, secret: str = "") -> None:
    """Overwrite line ``number`` of a session file at the same length.

    With ``secret``, the line's timestamp becomes the secret (still valid JSON, an invalid
    entry); without, the line becomes invalid JSON.
    """
    path = directory / f"{session_id}.jsonl"
    lines = path.read_bytes().split(b"\n")
    line = lines[number - 1]
    if secret:
        damaged = re.sub(rb'"timestamp":"[^"]{24}"', f'"timestamp":"{secret}"'.encode(), line)
        assert damaged != line and len(damaged) == len(line)
    else:
        damaged = b"{" + b"x" * (len(line) - 2) + b"}"
    lines[number - 1] = damaged
    path.write_bytes(b"\n".join(lines))
