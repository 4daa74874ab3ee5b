"""JSONL ``delete_session`` seen from other processes, on damaged files and after a crash.

A process that stays open (``prism-om mcp``) must not serve an erased session's text, nor
take a file re-created under the same id for a damaged one; a damaged session can be
erased without a repair first; what an older version's deleter killed while zeroing left
reads as no session and is finished.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from prism_om.entries import SessionEntry
from prism_om.errors import SessionNotFoundError
from prism_om.session import Session
from prism_om.stores.jsonl import JsonlStore
from prism_om.testing.om_factories import BranchBuilder

OLD = "the erased words, lorem ipsum dolor"


async def _write(path: Path, sid: str, *texts: str) -> None:
    async with await JsonlStore.open(path, fsync=False) as store:
        for text in texts:
            await Session(store, sid).append_message("user", text)


def _holding(directory: Path, text: str) -> list[str]:
    return [p.name for p in directory.iterdir() if text.encode() in p.read_bytes()]


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize(
    "new", ["the NEW words, lorem ipsum dolo", "short", "a much longer replacement " * 9]
)
@pytest.mark.parametrize("read_only", [False, True])
async def test_an_open_reader_sees_a_session_recreated_under_its_id(
    tmp_path: Path, new: str, read_only: bool
) -> None:
    await _write(tmp_path, "s1", OLD)
    reader = await JsonlStore.open(tmp_path, read_only=read_only)
    try:
        assert [e.message.content for e in await reader.list("s1")] == [OLD]  # type: ignore[union-attr]
        async with await JsonlStore.open(tmp_path, fsync=False) as writer:
            await writer.delete_session("s1")
            await Session(writer, "s1").append_message("user", new)
        for _ in range(2):
            got = [e.message.content for e in await reader.list("s1")]  # type: ignore[union-attr]
            assert got == [new]
            assert await reader.sessions() == ["s1"]
    finally:
        await reader.close()


async def test_an_open_reader_forgets_a_deleted_session(tmp_path: Path) -> None:
    await _write(tmp_path, "s1", OLD, "second")
    await _write(tmp_path, "s2", "kept")
    reader = await JsonlStore.open(tmp_path)
    try:
        entries = await reader.list("s1")
        async with await JsonlStore.open(tmp_path) as writer:
            await writer.delete_session("s1")
        assert await reader.list("s1") == []
        assert await reader.get(entries[0].id) is None
        assert await reader.sessions() == ["s2"]
        with pytest.raises(SessionNotFoundError):
            await reader.delete_session("s1")
    finally:
        await reader.close()


async def test_a_damaged_session_is_erased_without_a_repair(tmp_path: Path) -> None:
    await _write(tmp_path, "bad", OLD, "two", "three")
    await _write(tmp_path, "good", "kept")
    data = tmp_path / "bad.jsonl"
    data.write_bytes(data.read_bytes()[:-20])  # shorter than the sidecar's committed length
    async with await JsonlStore.open(tmp_path) as store:
        assert [c.session_id for c in await store.check() if c.problem] == ["bad"]
        assert await store.delete_session("bad") == 3
        assert [name for name in _names(tmp_path) if "bad" in name] == []
        assert [c for c in await store.check() if c.problem] == []
        assert await store.sessions() == ["good"]


async def test_a_session_whose_file_is_a_link_loses_the_link_not_its_target(
    tmp_path: Path,
) -> None:
    store_dir = tmp_path / "store"
    await _write(store_dir, "good", "kept")
    outside = tmp_path / "outside.txt"
    outside.write_text(OLD)
    (store_dir / "bad.jsonl").symlink_to(outside)
    async with await JsonlStore.open(store_dir) as store:
        await store.delete_session("bad")
        assert "bad.jsonl" not in _names(store_dir)
        assert outside.read_text() == OLD
        assert await store.sessions() == ["good"]


async def test_an_older_versions_delete_killed_while_zeroing_reads_as_gone_and_is_finished(
    tmp_path: Path,
) -> None:
    """What a delete of prism-om before its intent sidecar left when killed: the pending
    record, the sidecar, and a data file zeroed from its start (part way)."""
    await _write(tmp_path, "s1", OLD, OLD + " again", OLD + " and again")
    await _write(tmp_path, "s2", "kept")
    async with await JsonlStore.open(tmp_path) as store:
        # The older deleter's pending record, written by the store's own writer of it: no
        # public call of this version leaves this state (test_jsonl_delete_protocol
        # kills this version's deleter at every step).
        store._bump_counter(pending="s1")
    data = tmp_path / "s1.jsonl"
    raw = data.read_bytes()
    data.write_bytes(bytes(len(raw) // 2) + raw[len(raw) // 2 :])
    assert OLD.encode() in data.read_bytes()
    async with await JsonlStore.open(tmp_path, read_only=True) as reader:
        assert await reader.sessions() == ["s2"]
        assert [s.session_id for s in await reader.session_summaries()] == ["s2"]
        assert await reader.list("s1") == []
        assert [c for c in await reader.check() if c.problem] == []
    async with await JsonlStore.open(tmp_path) as store:
        assert await store.sessions() == ["s2"]
        await Session(store, "s2").append_message("user", "more")  # a writer finishes it
        assert not (tmp_path / "s1.jsonl").exists()
        assert not (tmp_path / "s1.leaf.json").exists()
        assert not _holding(tmp_path, OLD)
        assert [c for c in await store.check() if c.problem] == []


async def test_an_open_reader_forgets_cached_memory_of_a_reimported_session(
    tmp_path: Path,
) -> None:
    builder = BranchBuilder(session_id="s1", rng=random.Random(5), secrets=["billing"])
    for n in range(12):
        builder.message("user" if n % 2 == 0 else "assistant", f"billing note {n}")
        if n % 4 == 3:
            builder.observe(2, text="the user talked about billing")
    async with await JsonlStore.open(tmp_path, fsync=False) as writer:
        await writer.append_many(builder.entries)
    reader = await JsonlStore.open(tmp_path)
    try:
        before = await reader.live_ledger("s1")
        assert before.observations and all(
            "billing" in o.observation.text for o in before.observations
        )
        async with await JsonlStore.open(tmp_path, fsync=False) as writer:
            entries = await writer.list("s1")
            await writer.delete_session("s1")
            scrubbed = [
                SessionEntry.model_validate_json(
                    e.model_dump_json(by_alias=True).replace("billing", "SCRUBBED")
                )
                for e in entries
            ]
            await writer.append_many(scrubbed)
        after = await reader.live_ledger("s1")
        assert [o.id for o in after.observations] == [o.id for o in before.observations]
        assert all("billing" not in o.observation.text for o in after.observations)
    finally:
        await reader.close()
