"""Errors raised by every adapter carry what they are about (entry, session, store URL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prism_om.entries import SessionEntry, message_entry
from prism_om.errors import (
    DuplicateEntryError,
    EntryNotFoundError,
    RootExistsError,
    SessionMismatchError,
    StoreClosedError,
    UnknownParentError,
)
from prism_om.stores import SessionStore, open_store
from prism_om.testing.tree_only import TreeOnlyStore

KINDS = ["memory", "jsonl", "sqlite", "tree-only"]


def msg(session: str, entry_id: str, parent: str | None) -> SessionEntry:
    return message_entry(session, "user", entry_id, parent_id=parent, entry_id=entry_id)


async def open_kind(kind: str, tmp_path: Path) -> SessionStore:
    if kind == "tree-only":
        return TreeOnlyStore()
    url = {
        "memory": "memory:",
        "jsonl": f"jsonl:{tmp_path / 'store'}",
        "sqlite": f"sqlite:{tmp_path / 'store.db'}",
    }[kind]
    return await open_store(url)


@pytest.mark.parametrize("kind", KINDS)
async def test_rule_errors_name_the_entry_the_session_and_the_store(
    kind: str, tmp_path: Path
) -> None:
    async with await open_kind(kind, tmp_path) as store:
        await store.append_many([msg("s", "r", None), msg("s", "a", "r")])
        await store.append(msg("t", "t0", None))
        cases: list[tuple[type[Exception], object, str, str]] = [
            (DuplicateEntryError, store.append(msg("s", "a", "r")), "a", "s"),
            (UnknownParentError, store.append(msg("s", "b", "nowhere")), "b", "s"),
            (RootExistsError, store.append(msg("s", "r2", None)), "r2", "s"),
            (SessionMismatchError, store.append(msg("s", "c", "t0")), "c", "s"),
            (SessionMismatchError, store.checkout("s", "t0"), "t0", "s"),
            (EntryNotFoundError, store.checkout("s", "missing"), "missing", "s"),
        ]
        for error, call, entry_id, session_id in cases:
            with pytest.raises(error) as caught:
                await call  # type: ignore[misc]
            assert caught.value.entry_id == entry_id, (error, str(caught.value))  # type: ignore[attr-defined]
            assert caught.value.session_id == session_id, error  # type: ignore[attr-defined]
            assert caught.value.url == store.url, error  # type: ignore[attr-defined]
        with pytest.raises(EntryNotFoundError) as leaf_error:
            await store.entries("s", "missing")
        assert (leaf_error.value.entry_id, leaf_error.value.session_id) == ("missing", "s")
        assert leaf_error.value.url == store.url
    with pytest.raises(StoreClosedError) as closed:
        await store.get("a")
    assert closed.value.url == store.url
    with pytest.raises(StoreClosedError) as closed_write:
        await store.append(msg("s", "z", "a"))
    assert closed_write.value.url == store.url
