"""Session stores: the protocol, three adapters, and ``open_store(url)``.

URLs: ``memory:``, ``jsonl:<directory>`` and ``sqlite:<file>``; paths may be relative or
absolute (``sqlite:///tmp/x.db`` and ``sqlite:/tmp/x.db`` both name ``/tmp/x.db``).
``postgresql://user@host:port/db?schema=name`` (or ``postgres://``) opens a server store
(``stores.postgres``, the optional extra ``prism-om[postgres]``).
"""

from __future__ import annotations

from typing import Any

from .base import SessionStore, SessionSummary, SessionTree, StoreBase
from .memory import MemoryStore

__all__ = [
    "MemoryStore",
    "SessionStore",
    "SessionSummary",
    "SessionTree",
    "StoreBase",
    "open_store",
    "parse_store_url",
]


def parse_store_url(url: str) -> tuple[str, str]:
    """Split a store URL into its scheme and path, raising ``InvalidInputError``."""
    from ..core.redaction import hide_url_password
    from ..errors import InvalidInputError

    scheme, sep, rest = url.partition(":")
    if scheme in {"postgresql", "postgres"} and rest.startswith("//"):
        # A server URL is handed on whole: host, port, database and options.
        return "postgresql", url
    if not sep or scheme not in {"memory", "jsonl", "sqlite"}:
        raise InvalidInputError(
            f"unknown store URL {hide_url_password(url)!r}: use memory:, jsonl:<directory>, "
            "sqlite:<file> or postgresql://user@host:port/db"
        )
    if rest.startswith("///") or rest.startswith("//"):
        rest = rest[2:]
    if scheme != "memory" and not rest:
        raise InvalidInputError(f"store URL {hide_url_password(url)!r} names no path")
    return scheme, rest


async def open_store(url: str, *, read_only: bool = False, create: bool = True) -> SessionStore:
    """Open the store a URL names; the caller closes it (or uses ``async with``).

    ``create=False`` refuses a store that does not exist yet (``StoreNotFoundError``)
    instead of making an empty one; ``read_only=True`` never creates or changes anything,
    and the store's writes raise ``ReadOnlyStoreError``. ``memory:`` ignores both.
    """
    from ..errors import StoreError

    scheme, path = parse_store_url(url)
    if scheme == "memory":
        return MemoryStore(url)
    # Only what differs from the defaults is passed on, so an adapter that has no such
    # options yet still opens as before.
    options: dict[str, Any] = {}
    if read_only:
        options["read_only"] = True
    if not create:
        options["create"] = False
    if scheme == "jsonl":
        from .jsonl.store import JsonlStore

        return await JsonlStore.open(path, **options)
    if scheme == "postgresql":
        try:
            from .postgres import PostgresStore
        except ImportError as exc:
            from .._extras import install_hint

            raise StoreError(
                f"a PostgreSQL store needs its driver: {install_hint('postgres')} ({exc})"
            ) from exc
        return await PostgresStore.open(path, **options)
    from .sqlite import SqliteStore

    return await SqliteStore.open(path, **options)
