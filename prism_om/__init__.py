"""prism_om: durable, source-backed observational memory for long agent sessions."""

from __future__ import annotations

from .entries import SessionEntry, custom_entry, message_entry
from .ids import create_entry_id, create_memory_id, is_memory_id
from .stores import SessionStore, open_store

__all__ = [
    "SessionEntry",
    "SessionStore",
    "create_entry_id",
    "create_memory_id",
    "custom_entry",
    "is_memory_id",
    "message_entry",
    "open_store",
]
