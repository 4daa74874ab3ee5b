"""Errors raised by every adapter carry what they are about (entry, session, store URL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prism_om.core.records import OBSERVATIONS_RECORDED
from prism_om.entries import SessionEntry, custom_entry, message_entry
from prism_om.errors import (
    DuplicateEntryError,
    EntryNotFoundError,
    InvalidIdError,
    MemoryRecordError,
    RootExistsError,
    SessionExistsError,
    SessionMismatchError,
    StoreClosedError,
    StoreNotFoundError,
    UnknownParentError,
)
from prism_om.ids import create_memory_id
from prism_om.importers import import_conversation
from prism_om.observational_memory import recall_observational_memory
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


def observation_record(session: str, parent: str, memory_id: str, source: str) -> SessionEntry:
    observation = {"id": memory_id, "text": "noted", "sourceEntryIds": [source]}
    return custom_entry(
        session,
        {"type": OBSERVATIONS_RECORDED, "observations": [observation]},
        parent_id=parent,
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_cursor_errors_name_the_cursor_the_session_and_the_store(
    kind: str, tmp_path: Path
) -> None:
    async with await open_kind(kind, tmp_path) as store:
        await store.append_many([msg("s", "r", None), msg("s", "a", "r")])
        reads = (
            lambda: store.page_messages("s", "ghost", 5),
            lambda: store.entries_after("s", "ghost"),
        )
        for read in reads:
            with pytest.raises(EntryNotFoundError) as caught:
                await read()
            error = caught.value
            assert (error.entry_id, error.session_id, error.url) == ("ghost", "s", store.url)
            assert "'ghost'" in str(error)


@pytest.mark.parametrize("kind", KINDS)
async def test_memory_record_errors_name_the_record_and_the_store(
    kind: str, tmp_path: Path
) -> None:
    async with await open_kind(kind, tmp_path) as store:
        await store.append_many([msg("s", "r", None), msg("s", "a", "r")])
        cites_ghost = observation_record("s", "a", create_memory_id(), "ghost")
        with pytest.raises(MemoryRecordError) as caught:
            await store.append(cites_ghost)
        error = caught.value
        assert (error.entry_id, error.session_id, error.url) == (cites_ghost.id, "s", store.url)
        malformed = observation_record("s", "a", "BAD", "a")
        with pytest.raises(MemoryRecordError) as caught:
            await store.append(malformed)
        error = caught.value
        assert (error.entry_id, error.session_id, error.url) == (malformed.id, "s", store.url)
        assert error.memory_id == "BAD" and "'BAD'" in str(error)
        assert await store.get(cites_ghost.id) is None and await store.get(malformed.id) is None


@pytest.mark.parametrize("kind", KINDS)
async def test_recall_of_a_malformed_id_names_the_session_and_the_store(
    kind: str, tmp_path: Path
) -> None:
    async with await open_kind(kind, tmp_path) as store:
        await store.append(msg("s", "r", None))
        with pytest.raises(InvalidIdError) as caught:
            await recall_observational_memory(store, "XYZ", session_id="s")
        error = caught.value
        assert (error.memory_id, error.session_id, error.url) == ("XYZ", "s", store.url)


@pytest.mark.parametrize("kind", KINDS)
async def test_import_into_an_existing_session_names_the_store(kind: str, tmp_path: Path) -> None:
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    async with await open_kind(kind, tmp_path) as store:
        await store.append(msg("s", "r", None))
        with pytest.raises(SessionExistsError) as caught:
            await import_conversation(store, transcript, session_id="s")
        assert (caught.value.session_id, caught.value.url) == ("s", store.url)


@pytest.mark.parametrize("scheme", ["jsonl", "sqlite"])
async def test_opening_a_missing_store_names_its_url(scheme: str, tmp_path: Path) -> None:
    url = f"{scheme}:{tmp_path / 'missing'}"
    with pytest.raises(StoreNotFoundError) as caught:
        await open_store(url, create=False)
    assert caught.value.url == url
