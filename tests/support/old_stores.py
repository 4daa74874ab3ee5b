"""The committed SQLite stores of older schema versions (``tests/data/sqlite``), read with
plain ``sqlite3`` and none of the adapter's code: what a migrated copy must answer.

A read-only open of such a file refuses it (``StoreVersionError``), so the state before a
migration is taken from the fixture's own rows: every entry, validated from the row as an
import would, appended in the order the file holds them to a ``MemoryStore`` (whose reads
are the pure folds of ``prism_om.core``), with each session's leaf as the file names it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from prism_om.entries import SessionEntry, entry_from_wire
from prism_om.stores.memory import MemoryStore

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "sqlite"
# The first version whose entries.body holds the payload alone, not the whole wire JSON.
_PAYLOAD_BODIES = 4
# The first version whose message entries may carry data (entries.data).
_MESSAGE_DATA = 7


def fixture(version: int) -> Path:
    """The committed store of schema ``version``."""
    return FIXTURES / f"store-v{version}.db"


def version_of(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def copy_of(version: int, directory: Path) -> Path:
    """A copy of the fixture of ``version`` in ``directory``, not opened yet."""
    path = directory / f"v{version}.db"
    shutil.copyfile(fixture(version), path)
    assert version_of(path) == version
    return path


def _wire(row: tuple[Any, ...], version: int) -> Any:
    """The entry's wire, from the row's own shape: the whole wire JSON in the body up to
    version 3, then the envelope columns around the payload (from version 7 a message
    entry's data in its own column)."""
    entry_id, session_id, parent_id, kind, timestamp, body, data = row
    if version < _PAYLOAD_BODIES:
        return body
    wire: dict[str, Any] = {
        "id": entry_id,
        "sessionId": session_id,
        "parentId": parent_id,
        "kind": kind,
        "timestamp": timestamp,
    }
    payload = json.loads(body)
    if kind == "message":
        wire["message"] = payload
        if data is not None:
            wire["data"] = json.loads(data)
    elif kind == "custom":
        wire["data"] = payload
    else:
        wire.update(payload)
    return wire


def fixture_entries(path: Path) -> tuple[list[SessionEntry], dict[str, str]]:
    """Every entry of the file in append order, and each session's leaf."""
    version = version_of(path)
    conn = sqlite3.connect(path)
    try:
        data = "data" if version >= _MESSAGE_DATA else "NULL"
        rows = conn.execute(
            f"SELECT id, session_id, parent_id, kind, timestamp, body, {data} FROM entries"
            " ORDER BY seq"
        ).fetchall()
        leaves = dict(conn.execute("SELECT session_id, leaf_id FROM sessions ORDER BY seq"))
    finally:
        conn.close()
    return [entry_from_wire(_wire(row, version)) for row in rows], leaves


async def reference_store(path: Path) -> MemoryStore:
    """A ``MemoryStore`` holding what the file at ``path`` holds (close it after use)."""
    entries, leaves = fixture_entries(path)
    store = MemoryStore()
    for entry in entries:
        await store.append(entry)
    for session_id, leaf in leaves.items():
        if await store.leaf(session_id) != leaf:
            await store.checkout(session_id, leaf)
    return store
