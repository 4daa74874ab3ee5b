"""The JSONL store-wide id index: a first write parses no other session's file.

``.ids`` records each session file's ids with the file's inode, size and mtime; a write
loads a session it has not loaded only when no record matches its file or when the batch
names one of its ids. Work is counted in lines parsed and data files read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prism_om.entries import SessionEntry, entry_from_wire, message_entry
from prism_om.errors import DuplicateEntryError, SessionMismatchError, UnknownParentError
from prism_om.stores.jsonl import JsonlStore
from prism_om.stores.jsonl import loading as jsonl_loading
from prism_om.stores.jsonl import store as jsonl
from prism_om.stores.jsonl.id_index import IDS_NAME

SESSIONS = [f"s{i}" for i in range(12)]
LENGTH = 15


class Work:
    """Lines parsed into entries and session data files read, by the JSONL store."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.parsed = 0
        self.files: list[str] = []
        read_file = JsonlStore._read_file

        def parse(wire: object, *, where: str = "entry") -> SessionEntry:
            self.parsed += 1
            return entry_from_wire(wire, where=where)

        def read(store: JsonlStore, name: str, offset: int, length: int | None = None) -> bytes:
            if name.endswith(".jsonl"):
                self.files.append(name)
            return read_file(store, name, offset, length)

        monkeypatch.setattr(jsonl_loading, "entry_from_wire", parse)
        monkeypatch.setattr(JsonlStore, "_read_file", read)

    def reset(self) -> None:
        self.parsed = 0
        self.files.clear()


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Work:
    monkeypatch.setattr(jsonl, "_ids_due", lambda loaded: loaded > 0)
    return Work(monkeypatch)


def _msg(sid: str, entry_id: str, parent: str | None) -> SessionEntry:
    return message_entry(sid, "user", entry_id, parent_id=parent, entry_id=entry_id)


async def _build(directory: Path) -> None:
    async with await JsonlStore.open(directory, fsync=False) as store:
        for sid in SESSIONS:
            chain = [_msg(sid, f"{sid}-0", None)]
            chain += [_msg(sid, f"{sid}-{i}", f"{sid}-{i - 1}") for i in range(1, LENGTH)]
            await store.append_many(chain)
    # The next process's first write loads them all (no .ids yet) and records them.
    async with await JsonlStore.open(directory, fsync=False) as store:
        await store.append(_msg("first", "first-0", None))


async def test_a_first_write_parses_no_other_session(tmp_path: Path, work: Work) -> None:
    await _build(tmp_path)
    assert (tmp_path / IDS_NAME).exists()
    work.reset()
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append(_msg("new", "new-0", None))
        # Only the session the last process wrote after recording .ids is read.
        assert (work.parsed, work.files) == (1, ["first.jsonl"])
        # Appending to a session loads that session alone.
        await store.append(_msg("s5", "s5-x", f"s5-{LENGTH - 1}"))
        assert work.files == ["first.jsonl", "s5.jsonl"]
        assert work.parsed == 1 + LENGTH
        assert [e.id for e in await store.entries("s5")][-2:] == [f"s5-{LENGTH - 1}", "s5-x"]
        assert await store.sessions() == [*SESSIONS, "first", "new"]


async def _errors(directory: Path) -> list[tuple[type[Exception], str]]:
    """What three bad appends raise, in order."""
    found: list[tuple[type[Exception], str]] = []
    async with await JsonlStore.open(directory, fsync=False) as store:
        for bad in (
            _msg("new", "s7-3", None),  # an id of an unloaded session
            _msg("new", "n1", "s8-2"),  # a parent in another session
            _msg("new", "n2", "nowhere"),
        ):
            refused = (DuplicateEntryError, SessionMismatchError, UnknownParentError)
            with pytest.raises(refused) as e:
                await store.append(bad)
            found.append((type(e.value), str(e.value)))
    return found


async def test_ids_of_unloaded_sessions_are_refused_as_with_every_session_loaded(
    tmp_path: Path, work: Work
) -> None:
    await _build(tmp_path)
    work.reset()
    with_index = await _errors(tmp_path)
    # The owners, loaded to raise, and the session the last process wrote.
    assert set(work.files) == {"first.jsonl", "s7.jsonl", "s8.jsonl"}
    (tmp_path / IDS_NAME).unlink()
    jsonl_ids = await _errors(tmp_path)
    assert with_index == jsonl_ids
    assert [kind for kind, _ in with_index] == [
        DuplicateEntryError,
        SessionMismatchError,
        UnknownParentError,
    ]


async def test_a_session_changed_since_the_record_is_loaded_and_recorded_again(
    tmp_path: Path, work: Work
) -> None:
    await _build(tmp_path)
    async with await JsonlStore.open(tmp_path, fsync=False) as other:
        await other.append(_msg("s9", "s9-late", f"s9-{LENGTH - 1}"))
    work.reset()
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append(_msg("new", "new-0", None))
    assert work.files == ["s9.jsonl"]  # ("first" was recorded by the other writer)
    work.reset()
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append(_msg("new", "new-1", "new-0"))
        with pytest.raises(DuplicateEntryError):
            await store.append(_msg("new", "s9-late", "new-1"))
    assert work.files == ["new.jsonl", "s9.jsonl"]  # the one written, the id's owner


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "other version", "garbage"])
async def test_a_damaged_ids_file_is_ignored_and_rebuilt(
    tmp_path: Path, work: Work, damage: str
) -> None:
    await _build(tmp_path)
    path = tmp_path / IDS_NAME
    raw = path.read_bytes()
    if damage == "flipped byte":
        at = raw.index(b"s3-4")
        path.write_bytes(raw[:at] + b"S" + raw[at + 1 :])
    elif damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "other version":
        path.write_bytes(raw.replace(b'"version": 1', b'"version": 7', 1))
    else:
        path.write_bytes(b"\xff\x00{")
    work.reset()
    assert (await _errors(tmp_path))[0][0] is DuplicateEntryError
    assert len(work.files) >= len(SESSIONS)  # every session read: the file was not trusted
    work.reset()
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append(_msg("later", "later-0", None))
    assert len(work.files) < 3  # rebuilt: at most the sessions written since


async def test_sessions_another_process_creates_or_deletes_meanwhile_are_seen(
    tmp_path: Path, work: Work
) -> None:
    await _build(tmp_path)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append(_msg("mine", "mine-0", None))
        async with await JsonlStore.open(tmp_path, fsync=False) as other:
            await other.append(_msg("late", "late-0", None))
            await other.delete_session("s3")
        with pytest.raises(DuplicateEntryError):
            await store.append(_msg("mine", "late-0", "mine-0"))
        await store.append(_msg("mine", "s3-0", "mine-0"))  # its ids went with it
        assert [e.id for e in await store.entries("mine")] == ["mine-0", "s3-0"]


async def test_delete_session_drops_the_ids_file(tmp_path: Path, work: Work) -> None:
    await _build(tmp_path)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.delete_session("s4")
    assert not (tmp_path / IDS_NAME).exists()
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append(_msg("again", "s4-1", None))  # the erased ids are free
    assert b"s4-" not in (tmp_path / IDS_NAME).read_bytes().replace(b'"s4-1"', b"")
