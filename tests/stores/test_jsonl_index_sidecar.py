"""The JSONL index sidecar: a reopen parses only what it reads, and never trusts blindly.

A session's ``.<id>.index`` lets a reopen place message lines in the tree unparsed. Work
is counted in lines parsed (``entry_from_wire`` calls), never in wall-clock time; every
damaged, stale or foreign index must read back exactly as no index at all.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prism_om.entries import SessionEntry, entry_from_wire, message_entry
from prism_om.errors import CorruptStoreError
from prism_om.stores.jsonl import JsonlStore
from prism_om.stores.jsonl import loading as jsonl_loading
from prism_om.stores.jsonl import store as jsonl
from prism_om.stores.jsonl.index_sidecar import index_body, index_name
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import random_builder

SID = "om"


class Parses:
    """Counts the lines the JSONL store parses into entries."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, wire: object, *, where: str = "entry") -> SessionEntry:
        self.count += 1
        return entry_from_wire(wire, where=where)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Parses:
    counter = Parses()
    monkeypatch.setattr(jsonl_loading, "entry_from_wire", counter)
    return counter


@pytest.fixture
def always_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every append rewrites the index, so it covers the whole file."""
    monkeypatch.setattr(jsonl, "_index_due", lambda lines, indexed: lines > indexed)
    yield


def _index(directory: Path, sid: str = SID) -> Path:
    return directory / index_name(sid)


def _lines(directory: Path, sid: str = SID) -> int:
    return len((directory / f"{sid}.jsonl").read_bytes().splitlines())


async def _build(directory: Path, seed: int = 3, steps: int = 120) -> None:
    async with await JsonlStore.open(directory, fsync=False) as store:
        await load_builder(store, random_builder(seed, steps, session_id=SID))


async def _snapshot(directory: Path, sid: str = SID) -> dict[str, Any]:
    """Everything a reader sees of the session, from a fresh process-level open."""
    async with await JsonlStore.open(directory, fsync=False) as store:
        leaf = await store.leaf(sid)
        recent = await store.recent_messages(sid, 5)
        summaries = await store.session_summaries()
        branch = await store.entries(sid)
        return {
            "leaf": leaf,
            "recent": [e.model_dump() for e in recent],
            "summaries": summaries,
            "leaves": await store.leaves(sid),
            "head": await store.memory_head(sid),
            "ledger": await store.ledger(sid),
            "branch": [e.model_dump() for e in branch],
            "all": [e.model_dump() for e in await store.list(sid)],
            "count": await store.entry_count(sid),
        }


async def _without_index(directory: Path, sid: str = SID) -> dict[str, Any]:
    saved = _index(directory, sid).read_bytes() if _index(directory, sid).exists() else None
    _index(directory, sid).unlink(missing_ok=True)
    try:
        return await _snapshot(directory, sid)
    finally:
        if saved is not None:
            _index(directory, sid).write_bytes(saved)


async def test_reopen_parses_only_the_root_of_an_indexed_message_session(
    tmp_path: Path, always_index: None, parses: Parses
) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        parent = None
        for start in range(0, 300, 30):
            batch = []
            for i in range(start, start + 30):
                entry = message_entry(SID, "user", f"m{i}", parent_id=parent, entry_id=f"m{i}")
                batch.append(entry)
                parent = entry.id
            await store.append_many(batch)
    assert _index(tmp_path).exists()
    parses.count = 0
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert await store.leaf(SID) == "m299"
        assert await store.entry_count(SID) == 300
        assert parses.count == 1  # the root, checked against its row (the leaf is not read)
        recent = await store.recent_messages(SID, 20)
        assert [e.id for e in recent] == [f"m{i}" for i in range(280, 300)]
        assert parses.count == 21  # and the 20 entries read, once each
        assert [e.id for e in await store.recent_messages(SID, 20)] == [e.id for e in recent]
        assert parses.count == 21


async def test_an_indexed_reopen_reads_what_a_full_parse_reads(
    tmp_path: Path, always_index: None, parses: Parses
) -> None:
    await _build(tmp_path)
    parses.count = 0
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.entry_count(SID)
    assert 0 < parses.count < _lines(tmp_path)  # memory records and the root only
    assert await _snapshot(tmp_path) == await _without_index(tmp_path)


def _flip(raw: bytes, at: int) -> bytes:
    return raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1 :]


def _damage_cases() -> list[str]:
    return [
        "truncated",
        "header byte",
        "body byte",
        "last byte",
        "empty",
        "not json",
        "wrong version",
        "other session",
        "data edited under it",
        "symbolic link",
    ]


def _damage(directory: Path, case: str) -> None:
    path = _index(directory)
    raw = path.read_bytes()
    header, body = raw.split(b"\n", 1)
    if case == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif case == "header byte":
        path.write_bytes(_flip(raw, header.index(b'"data"') + 12))
    elif case == "body byte":
        path.write_bytes(_flip(raw, len(header) + 1 + len(body) // 2))
    elif case == "last byte":
        path.write_bytes(_flip(raw, len(raw) - 3))
    elif case == "empty":
        path.write_bytes(b"")
    elif case == "not json":
        path.write_bytes(b"\x00garbage\n\xff")
    elif case == "wrong version":
        value = json.loads(header)
        value["version"] = 99
        path.write_bytes(json.dumps(value).encode() + b"\n" + body)
    elif case == "other session":
        path.unlink()
        os.rename(_index(directory, "other"), path)
    elif case == "data edited under it":
        # Same length, still valid JSON, the same ids: only the digest tells.
        data = directory / f"{SID}.jsonl"
        text = data.read_bytes()
        at = text.index(b'.000Z"', len(text) // 2)
        data.write_bytes(text[:at] + b'.001Z"' + text[at + 6 :])
    elif case == "symbolic link":
        path.unlink()
        path.symlink_to(_index(directory, "other"))


@pytest.mark.parametrize("case", _damage_cases())
async def test_a_damaged_or_foreign_index_reads_as_no_index(
    tmp_path: Path, always_index: None, parses: Parses, case: str
) -> None:
    await _build(tmp_path)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await load_builder(store, random_builder(4, 40, session_id="other"))
    _damage(tmp_path, case)
    expected = await _without_index(tmp_path)
    parses.count = 0
    assert await _snapshot(tmp_path) == expected
    assert parses.count >= _lines(tmp_path)  # every line parsed: the index was not used


async def test_an_index_left_behind_by_an_older_writer_serves_its_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, always_index: None, parses: Parses
) -> None:
    await _build(tmp_path)
    indexed = _lines(tmp_path)
    # A writer that knows no index (an older version, another tool) appends more.
    monkeypatch.setattr(jsonl, "_index_due", lambda lines, indexed: False)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        leaf = await store.leaf(SID)
        for i in range(40):
            entry = message_entry(SID, "assistant", f"late {i}", parent_id=leaf)
            await store.append(entry)
            leaf = entry.id
    header, body = _index(tmp_path).read_bytes().split(b"\n", 1)
    assert json.loads(header)["lines"] == indexed
    parsed_rows = json.loads(body)["kinds"].count("x") + 1  # other entries, the root
    parses.count = 0
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.entry_count(SID)
    assert parses.count == parsed_rows + 40  # and the new lines (the leaf is not read)
    assert await _snapshot(tmp_path) == await _without_index(tmp_path)


async def test_a_failed_index_write_loses_nothing_and_its_debris_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, always_index: None
) -> None:
    await _build(tmp_path)
    before = (_index(tmp_path)).read_bytes()

    def fail(self: JsonlStore, sid: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(JsonlStore, "_index_fault_point", fail)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        leaf = await store.leaf(SID)
        await store.append(message_entry(SID, "user", "after", parent_id=leaf, entry_id="after"))
        assert await store.leaf(SID) == "after"
    assert _index(tmp_path).read_bytes() == before  # the old one stays, the new one is a temp
    temp = tmp_path / f"{index_name(SID)}.tmp"
    assert temp.exists()
    assert (await _snapshot(tmp_path))["leaf"] == "after"
    assert await _snapshot(tmp_path) == await _without_index(tmp_path)
    monkeypatch.undo()
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append(message_entry(SID, "user", "next", parent_id="after"))
    assert not temp.exists()


_KILLED_WRITER = """
import asyncio, os, signal, sys
from prism_om.entries import message_entry
from prism_om.stores.jsonl import store as jsonl
from prism_om.stores.jsonl import JsonlStore

jsonl._index_due = lambda lines, indexed: lines > indexed
def die(self, sid):
    print("dying", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
JsonlStore._index_fault_point = die

async def main():
    async with await JsonlStore.open(sys.argv[1]) as store:
        leaf = await store.leaf("om")
        await store.append(message_entry("om", "user", "last", parent_id=leaf, entry_id="last"))

asyncio.run(main())
"""


async def test_a_writer_killed_while_writing_the_index_loses_nothing(
    tmp_path: Path, always_index: None
) -> None:
    for round_no in range(2):
        directory = tmp_path / f"round{round_no}"
        await _build(directory, seed=round_no)
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", _KILLED_WRITER, str(directory)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == -signal.SIGKILL, done.stderr
        assert "dying" in done.stdout
        seen = await _snapshot(directory)
        assert seen["leaf"] == "last"  # committed before the index was written
        assert seen == await _without_index(directory)


_TWO_WRITERS = """
import asyncio, sys
from prism_om.entries import message_entry
from prism_om.stores.jsonl import store as jsonl
from prism_om.stores.jsonl import JsonlStore

jsonl._index_due = lambda lines, indexed: lines > indexed

async def main(directory, name, rounds):
    for i in range(rounds):
        async with await JsonlStore.open(directory, fsync=False) as store:
            before = await store.entry_count("om")
            batch = [message_entry("om", "user", f"{name} {i}.{j}") for j in range(3)]
            await store.append_at_leaf(batch)
            assert await store.entry_count("om") >= before + 3

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_two_processes_appending_and_reopening_stay_consistent(
    tmp_path: Path, always_index: None
) -> None:
    await _build(tmp_path, steps=60)
    start = _lines(tmp_path)

    def run_writers() -> list[tuple[int, str]]:
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", _TWO_WRITERS, str(tmp_path), name, "15"],
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in ("a", "b")
        ]
        return [(w.wait(timeout=120), w.communicate()[1]) for w in writers]

    for returncode, err in await asyncio.to_thread(run_writers):
        assert returncode == 0, err
    seen = await _snapshot(tmp_path)
    assert seen == await _without_index(tmp_path)
    assert len(seen["all"]) == start + 2 * 15 * 3
    texts = {e["message"]["content"] for e in seen["branch"] if e.get("message")}
    assert {f"{n} {i}.{j}" for n in "ab" for i in range(15) for j in range(3)} <= texts


async def test_check_parses_every_line_an_index_let_a_load_skip(
    tmp_path: Path, always_index: None, parses: Parses
) -> None:
    await _build(tmp_path)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.entry_count(SID)
        parses.count = 0
        (found,) = await store.check()
        assert found.problem is None and found.entries == _lines(tmp_path)
        assert parses.count >= _lines(tmp_path) - 150  # the lines the load kept raw


async def test_delete_and_repair_remove_the_index(tmp_path: Path, always_index: None) -> None:
    await _build(tmp_path)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.delete_session(SID)
    assert not _index(tmp_path).exists()
    await _build(tmp_path)
    data = tmp_path / f"{SID}.jsonl"
    data.write_bytes(data.read_bytes()[:-5])  # committed bytes lost: damage
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        (result,) = await store.repair(tmp_path.parent / f"{tmp_path.name}-backup")
        assert result.problem is not None
    assert not _index(tmp_path).exists()
    assert (await _snapshot(tmp_path))["count"] > 0


async def _forge(directory: Path, rename_last_to: str) -> str:
    """Write an index with intact digests whose last row names another id."""
    data = (directory / f"{SID}.jsonl").read_bytes()
    entries = [json.loads(line) for line in data.splitlines()]
    last = entries[-1]["id"]
    assert all(e.get("parentId") != last for e in entries)  # a leaf: the tree still holds
    ids = [e["id"] for e in entries[:-1]] + [rename_last_to]
    parents = [e.get("parentId") for e in entries]
    kinds = "".join("e" if e["kind"] == "message" else "x" for e in entries)
    _index(directory).write_bytes(index_body(SID, data, ids, parents, kinds, None))
    return last


async def test_an_index_that_lies_about_a_kept_line_is_caught_when_it_is_read(
    tmp_path: Path,
) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        parent = None
        for i in range(30):
            entry = message_entry(SID, "user", f"m{i}", parent_id=parent, entry_id=f"m{i}")
            await store.append(entry)
            parent = entry.id
    real = await _forge(tmp_path, "forged")
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        with pytest.raises(CorruptStoreError, match=r"om\.jsonl line 30: holds entry 'm29'"):
            await store.entries(SID)
        (found,) = await store.check()
        assert found.problem is not None and "'forged'" in found.problem
        (repaired,) = await store.repair(tmp_path.parent / f"{tmp_path.name}-backup")
        assert repaired.lost_bytes == 0 and repaired.entries == 30
        assert (await store.entries(SID))[-1].id == real
    assert not _index(tmp_path).exists()


async def test_an_index_whose_parsed_rows_disagree_is_not_used(
    tmp_path: Path, parses: Parses
) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        parent = None
        for i in range(30):
            entry = message_entry(SID, "user", f"m{i}", parent_id=parent, entry_id=f"m{i}")
            await store.append(entry)
            parent = entry.id
    data = (tmp_path / f"{SID}.jsonl").read_bytes()
    ids = [f"m{i}" for i in range(30)]
    parents = [None, *ids[:-1]]
    # Digests intact, but the root's row says "x" where the line is a message.
    _index(tmp_path).write_bytes(index_body(SID, data, ids, parents, "x" + "e" * 29, None))
    parses.count = 0
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert await store.entry_count(SID) == 30
    assert parses.count == 1 + 30  # the root against its row, then every line
    assert await _snapshot(tmp_path) == await _without_index(tmp_path)
