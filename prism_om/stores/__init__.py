"""Session stores: the protocol, three adapters, and ``open_store(url)``.

URLs: ``memory:``, ``jsonl:<directory>`` and ``sqlite:<file>``; paths may be relative or
absolute (``sqlite:///tmp/x.db`` and ``sqlite:/tmp/x.db`` both name ``/tmp/x.db``).
"""

from __future__ import annotations

from .base import SessionStore
from .memory import MemoryStore

__all__ = ["MemoryStore", "SessionStore", "open_store", "parse_store_url"]


def parse_store_url(url: str) -> tuple[str, str]:
    """Split a store URL into its scheme and path, raising ``InvalidInputError``."""
    from ..errors import InvalidInputError

    scheme, sep, rest = url.partition(":")
    if not sep or scheme not in {"memory", "jsonl", "sqlite"}:
        raise InvalidInputError(
            f"unknown store URL {url!r}: use memory:, jsonl:<directory> or sqlite:<file>"
        )
    if rest.startswith("///") or rest.startswith("//"):
        rest = rest[2:]
    if scheme != "memory" and not rest:
        raise InvalidInputError(f"store URL {url!r} names no path")
    return scheme, rest


async def open_store(url: str) -> SessionStore:
    """Open the store a URL names; the caller closes it (or uses ``async with``)."""
    scheme, path = parse_store_url(url)
    if scheme == "memory":
        return MemoryStore(url)
    if scheme == "jsonl":
        from .jsonl import JsonlStore

        return await JsonlStore.open(path)
    from .sqlite import SqliteStore

    return await SqliteStore.open(path)
