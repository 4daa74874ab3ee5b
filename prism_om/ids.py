"""Memory ids (12 lowercase hex characters) and unique entry ids."""

from __future__ import annotations

import os
import re
import secrets
import time

__all__ = ["MEMORY_ID_PATTERN", "create_entry_id", "create_memory_id", "is_memory_id"]

MEMORY_ID_PATTERN = re.compile(r"^[a-f0-9]{12}$")


def create_memory_id() -> str:
    """Mint a fresh 12-hex memory id for an observation or reflection."""
    return secrets.token_hex(6)


def is_memory_id(value: object) -> bool:
    """True when ``value`` is a well-formed memory id."""
    return isinstance(value, str) and MEMORY_ID_PATTERN.fullmatch(value) is not None


_last_ms = 0
_counter = 0
_node = os.urandom(5).hex()


def _reseed_after_fork() -> None:
    # A forked child must not mint the ids its parent mints in the same millisecond.
    global _node, _last_ms, _counter
    _node, _last_ms, _counter = os.urandom(5).hex(), 0, 0


os.register_at_fork(after_in_child=_reseed_after_fork)


def create_entry_id(prefix: str = "e") -> str:
    """Mint an entry id that sorts by creation time and is unique across processes.

    Milliseconds since the epoch, a per-process counter for ids minted in the same
    millisecond, and 40 random bits fixed per process.
    """
    global _last_ms, _counter
    now = int(time.time() * 1000)
    if now == _last_ms:
        _counter += 1
    else:
        _last_ms, _counter = now, 0
    return f"{prefix}{now:012x}{_counter:04x}{_node}"
