"""The JSONL store-wide id index: ``.ids``, the entry ids each session file holds.

Entry ids are unique across a store, so a write must know every id in it. Without this
file the first write of a process loads every session; with it, a session the process
has not loaded is vouched for by its record while its data file is unchanged, and is
loaded only when the batch names one of its ids (so the rule check raises exactly what it
raises with every session loaded).

Format: a header line ``{"version": 1, "body": <sha256 of line 2>}``, then the body
``{"sessions": {<session id>: [[inode, size, mtime_ns], [<id>, ...]]}}``. A record is
trusted only while the data file's inode, size and modification time are the recorded
ones (any append, cut, repair or hand edit changes one of them); a session without a
trusted record is loaded from its file. A missing, damaged or other-version file is
ignored. The file is a cache: the session files stay the one source of truth, and
deleting it loses nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

__all__ = ["IDS_NAME", "IDS_VERSION", "FileKey", "ForeignIds", "ids_body", "read_ids"]

IDS_NAME = ".ids"
IDS_VERSION = 1

# (inode, size, mtime_ns) of a session's data file.
FileKey = tuple[int, int, int]


def ids_body(sessions: Mapping[str, tuple[FileKey, Sequence[str]]]) -> bytes:
    body = json.dumps({"sessions": {s: [list(k), ids] for s, (k, ids) in sessions.items()}})
    raw = body.encode()
    header = {"version": IDS_VERSION, "body": hashlib.sha256(raw).hexdigest()}
    return json.dumps(header).encode() + b"\n" + raw + b"\n"


def read_ids(raw: bytes) -> dict[str, tuple[FileKey, list[str]]]:
    """The records of an intact ``.ids`` file; {} for anything else."""
    head, _, body = raw.partition(b"\n")
    body = body.rstrip(b"\n")
    try:
        header = json.loads(head)
        if not isinstance(header, dict) or header.get("version") != IDS_VERSION:
            return {}
        if hashlib.sha256(body).hexdigest() != header.get("body"):
            return {}
        sessions = json.loads(body)["sessions"]
        found: dict[str, tuple[FileKey, list[str]]] = {}
        for sid, (key, ids) in sessions.items():
            ino, size, mtime = key
            if not all(type(v) is int for v in (ino, size, mtime)) or not isinstance(ids, list):
                return {}
            if not all(type(i) is str for i in ids):
                return {}
            found[sid] = ((ino, size, mtime), ids)
        return found
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}


class ForeignIds:
    """Ids of sessions this process has not loaded, by the session holding them."""

    def __init__(self) -> None:
        self.owner: dict[str, str] = {}
        self.files: dict[str, tuple[FileKey, list[str]]] = {}

    def add(self, sid: str, key: FileKey, ids: list[str]) -> None:
        self.drop(sid)
        self.files[sid] = (key, ids)
        self.owner.update(dict.fromkeys(ids, sid))

    def drop(self, sid: str) -> None:
        record = self.files.pop(sid, None)
        if record is not None:
            owner = self.owner
            for entry_id in record[1]:
                if owner.get(entry_id) == sid:
                    del owner[entry_id]

    def clear(self) -> None:
        self.owner.clear()
        self.files.clear()
