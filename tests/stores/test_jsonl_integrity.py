"""JSONL store integrity (issue 13 items 4, 5, 6, 8, 17, 20): damage stays with its
session, lost committed bytes are refused, reads are lazy and read-only, dead writers'
debris is removed, and sidecars carry per-session summaries (backfilled from version 1).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.other_user import reachable_dir

from prism_om.entries import SessionEntry, message_entry
from prism_om.errors import (
    CorruptStoreError,
    ReadOnlyStoreError,
    StoreBusyError,
    StoreNotFoundError,
)
from prism_om.stores.base import SessionSummary
from prism_om.stores.jsonl import JsonlStore
from prism_om.stores.jsonl import loading as jsonl_loading

FIXTURE_V1 = Path(__file__).resolve().parents[1] / "data" / "jsonl_store_v1"


def msg(sid: str, eid: str, parent: str | None, text: str = "hello") -> SessionEntry:
    return message_entry(sid, "user", text, parent_id=parent, entry_id=eid)


def chain(sid: str, count: int, prefix: str | None = None) -> list[SessionEntry]:
    prefix = prefix or sid
    out: list[SessionEntry] = []
    for i in range(count):
        out.append(msg(sid, f"{prefix}-{i}", out[-1].id if out else None, f"{sid} {i}"))
    return out


def file_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name != ".lock"}


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def two_sessions(directory: Path, count: int = 40) -> None:
    async with await JsonlStore.open(directory, fsync=False) as store:
        await store.append_many(chain("good", count))
        await store.append_many(chain("bad", count))


async def ids(store: JsonlStore, sid: str) -> list[str]:
    return [e.id for e in await store.list(sid)]


# -- item 4: lost committed data is not a torn tail -------------------------------------------


async def test_file_cut_to_half_is_corrupt_and_nothing_is_rewritten(tmp_path: Path) -> None:
    await two_sessions(tmp_path, 200)
    path = tmp_path / "bad.jsonl"
    committed = path.stat().st_size
    path.write_bytes(path.read_bytes()[: committed // 2])
    before = file_bytes(tmp_path)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        for attempt in (store.list("bad"), store.leaf("bad"), store.append(msg("bad", "n", None))):
            with pytest.raises(CorruptStoreError) as info:
                await attempt
            text = str(info.value)
            assert "'bad'" in text and f"{committed // 2} bytes" in text
            assert f"{committed} committed bytes" in text
        with pytest.raises(CorruptStoreError):
            await store.checkout("bad", "bad-0")
        # The summary in the sidecar must not hide the loss.
        summaries = await store.session_summaries()
        assert [s.session_id for s in summaries] == ["good"]
        assert "bad" in await store.damaged_sessions()
        # Other sessions carry on, reads and writes.
        await store.append(msg("good", "more", "good-199"))
        assert len(await store.list("good")) == 201
    after = file_bytes(tmp_path)
    for name in ("bad.jsonl", "bad.leaf.json"):
        assert after[name] == before[name]


async def test_torn_tail_after_every_committed_byte_still_recovers(tmp_path: Path) -> None:
    await two_sessions(tmp_path, 5)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(path.read_bytes() + msg("bad", "torn", "bad-4").to_json().encode()[:30])
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert len(await store.list("bad")) == 5
        await store.append(msg("bad", "next", "bad-4"))
        assert (await ids(store, "bad"))[-1] == "next"


# -- item 5: damage stays with its session ----------------------------------------------------


def _garbage_line(directory: Path) -> None:
    path = directory / "bad.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = b"this is not json\n"
    path.write_bytes(b"".join(lines))


def _symlink(directory: Path) -> None:
    (directory / "bad.jsonl").unlink()
    (directory / "bad.jsonl").symlink_to(directory / "good.jsonl")


def _copied_file(directory: Path) -> None:
    shutil.copy(directory / "good.jsonl", directory / "bad.jsonl")


@pytest.mark.parametrize("damage", [_garbage_line, _symlink, _copied_file])
async def test_one_bad_file_leaves_the_others_readable(tmp_path: Path, damage: object) -> None:
    await two_sessions(tmp_path)
    assert callable(damage)
    damage(tmp_path)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert await ids(store, "good") == [f"good-{i}" for i in range(40)]
        with pytest.raises(CorruptStoreError, match=r"bad\.jsonl"):
            await store.list("bad")
        # Id lookups and writes load every session; the damaged one is skipped, not fatal.
        assert (await store.get("good-3")) is not None
        await store.append(msg("good", "after", "good-39"))
        await store.append_many(chain("fresh", 3))
        assert await store.sessions() == ["good", "bad", "fresh"]
        assert [s.session_id for s in await store.session_summaries()] == ["good", "fresh"]
        with pytest.raises(CorruptStoreError, match=r"bad\.jsonl"):
            await store.entries("bad")
    async with await JsonlStore.open(tmp_path, fsync=False) as again:
        assert len(await again.list("good")) == 41


async def test_a_repaired_session_is_read_again(tmp_path: Path) -> None:
    await two_sessions(tmp_path, 5)
    path = tmp_path / "bad.jsonl"
    good = path.read_bytes()
    path.write_bytes(good.replace(b'"id":"bad-2"', b'"id" "bad-2"', 1))  # same length
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        with pytest.raises(CorruptStoreError, match="line 3"):
            await store.list("bad")
        path.write_bytes(good)  # the files changed: the next read tries again
        assert len(await store.list("bad")) == 5


# -- item 17: a read touches only the sessions it names ---------------------------------------


async def test_reads_load_only_the_named_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        for sid in ("s1", "s2", "s3"):
            await store.append_many(chain(sid, 20))
    parsed: list[str] = []
    # Every stored line is parsed by entry_from_wire: the sessions of the parsed entries
    # are the sessions read (20 entries each, so a session read twice shows 40).
    original = jsonl_loading.entry_from_wire

    def spy(line: object, **kwargs: Any) -> SessionEntry:
        entry = original(line, **kwargs)
        parsed.append(entry.session_id)
        return entry

    monkeypatch.setattr(jsonl_loading, "entry_from_wire", spy)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert parsed == []  # opening reads no session
        assert len(await store.entries("s2")) == 20
        assert await store.leaf("s2") == "s2-19"
        assert await store.get("s2-3") is not None  # found among the loaded sessions
        assert parsed == ["s2"] * 20
        summaries = await store.session_summaries()
        assert await store.sessions() == ["s1", "s2", "s3"]
        assert await store.leaf("s3") == "s3-19"
        assert parsed == ["s2"] * 20  # listing, and a leaf, read sidecars only
        assert [(s.session_id, s.entries) for s in summaries] == [
            ("s1", 20),
            ("s2", 20),
            ("s3", 20),
        ]
        assert await store.get("s3-1") is not None  # an unknown id looks everywhere
        assert sorted(parsed) == ["s1"] * 20 + ["s2"] * 20 + ["s3"] * 20


async def test_summaries_follow_appends_forks_and_other_processes(tmp_path: Path) -> None:
    async with (
        await JsonlStore.open(tmp_path, fsync=False) as store,
        await JsonlStore.open(tmp_path, fsync=False) as other,
    ):
        entries = chain("s", 4)
        await store.append_many(entries[:2])
        await store.append_many(entries[2:])
        await store.checkout("s", "s-1")
        await store.append(msg("s", "fork", "s-1"))
        await store.append_many([msg("s", "f2", "s-0"), msg("s", "f3", "f2")])
        await other.append(msg("t", "t0", None))
        for reader in (store, other):
            got = {s.session_id: s for s in await reader.session_summaries()}
            for sid in ("s", "t"):
                listed = await reader.list(sid)
                assert got[sid] == SessionSummary(
                    sid,
                    len(listed),
                    sum(1 for e in listed if e.kind == "message"),
                    len(await reader.leaves(sid)),
                    max(e.timestamp for e in listed),
                )
        assert got["s"].leaves == 3  # s-3, fork, f3


# -- item 20: version 1 sidecars ---------------------------------------------------------------


@pytest.fixture
def v1_store(tmp_path: Path) -> Path:
    target = tmp_path / "v1"
    shutil.copytree(FIXTURE_V1, target)
    return target


async def test_v1_sidecars_are_read_and_summaries_computed_without_writing(
    v1_store: Path,
) -> None:
    before = file_bytes(v1_store)
    assert "version" not in json.loads(before["alpha.leaf.json"])
    async with await JsonlStore.open(v1_store, read_only=True) as store:
        assert await store.session_summaries() == [
            SessionSummary("alpha", 5, 5, 2, "2026-03-01T10:00:04.000Z"),
            SessionSummary("beta", 2, 2, 1, "2026-03-02T09:00:05.000Z"),
        ]
        assert await store.leaf("alpha") == "a5"
        assert await store.leaf("beta") == "b1"
        assert [e.id for e in await store.entries("alpha")] == ["a1", "a2", "a5"]
    assert file_bytes(v1_store) == before


async def test_v1_sidecars_are_backfilled_on_first_write(v1_store: Path) -> None:
    async with await JsonlStore.open(v1_store, fsync=False) as store:
        await store.append(msg("gamma", "g1", None))
    for sid, leaf, entries, leaves in (("alpha", "a5", 5, 2), ("beta", "b1", 2, 1)):
        side = json.loads((v1_store / f"{sid}.leaf.json").read_text())
        assert side["version"] == 2
        assert (side["leaf"], side["entries"], side["leaves"]) == (leaf, entries, leaves)
        assert side["committedBytes"] == (v1_store / f"{sid}.jsonl").stat().st_size
    async with await JsonlStore.open(v1_store, fsync=False) as store:
        assert await store.leaf("beta") == "b1"
        await store.append(msg("beta", "b3", "b1"))
        assert [e.id for e in await store.entries("beta")] == ["b1", "b3"]
        assert [(s.session_id, s.entries) for s in await store.session_summaries()] == [
            ("alpha", 5),
            ("beta", 3),
            ("gamma", 1),
        ]


async def test_a_newer_sidecar_version_is_refused_naming_both(tmp_path: Path) -> None:
    await two_sessions(tmp_path, 3)
    side = json.loads((tmp_path / "bad.leaf.json").read_text())
    (tmp_path / "bad.leaf.json").write_text(json.dumps({**side, "version": 9}))
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        with pytest.raises(Exception, match=r"version 9.*up to version 2"):
            await store.list("bad")
        assert len(await store.list("good")) == 3


# -- item 6: read-only opens ---------------------------------------------------------------


async def test_read_only_creates_nothing_and_refuses_writes(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match="missing"):
        await JsonlStore.open(tmp_path / "missing", read_only=True)
    with pytest.raises(StoreNotFoundError, match="missing"):
        await JsonlStore.open(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreNotFoundError, match="not a directory"):
        await JsonlStore.open(tmp_path / "file", create=False)
    (tmp_path / "empty").mkdir()
    async with await JsonlStore.open(tmp_path / "empty", read_only=True) as store:
        assert await store.sessions() == []
        with pytest.raises(ReadOnlyStoreError, match="empty"):
            await store.append(msg("s", "a", None))
        with pytest.raises(ReadOnlyStoreError, match="empty"):
            await store.checkout("s", "a")
        with pytest.raises(ReadOnlyStoreError):
            await store.repair(tmp_path / "backup")
    assert names(tmp_path / "empty") == []  # not even a lock file


async def test_read_only_reader_sees_a_writers_appends(tmp_path: Path) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as writer:
        await writer.append_many(chain("s", 3))
        async with await JsonlStore.open(tmp_path, read_only=True) as reader:
            assert len(await reader.list("s")) == 3
            await writer.append(msg("s", "more", "s-2"))
            assert len(await reader.list("s")) == 4
            assert await reader.leaf("s") == "more"


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    # pytest's tmp_path lives under a 0700 directory that nobody cannot enter.
    with reachable_dir("prism-om-ro-") as path:
        yield path


NOBODY_READS = """
import asyncio, sys
from prism_om.errors import ReadOnlyStoreError
from prism_om.stores.jsonl import JsonlStore

async def main(path):
    async with await JsonlStore.open(path, read_only=True) as store:
        print(len(await store.list("s")), await store.leaf("s"))
        print([s.entries for s in await store.session_summaries()])
        try:
            await store.append_many([])
            await store.checkout("s", "s-0")
        except ReadOnlyStoreError as exc:
            print("refused", type(exc).__name__)

asyncio.run(main(sys.argv[1]))
"""


async def test_an_unprivileged_user_reads_a_store_it_cannot_write(
    world_readable_dir: Path, nobody_python: list[str]
) -> None:
    store_dir = world_readable_dir / "store"
    async with await JsonlStore.open(store_dir, fsync=False) as store:
        await store.append_many(chain("s", 4))
    (store_dir / ".lock").unlink()  # a store copied without its lock file
    store_dir.chmod(0o555)
    before = names(store_dir)
    result = await asyncio.to_thread(
        subprocess.run,
        [*nobody_python, "-c", NOBODY_READS, str(store_dir)],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["4 s-3", "[4]", "refused ReadOnlyStoreError"]
    assert names(store_dir) == before


# -- item 8: debris of a writer that died -----------------------------------------------------

KILLED_IMPORT = """
import asyncio, os, signal, sys
from prism_om.entries import message_entry
from prism_om.stores.jsonl import store as jsonl

real_write_all = jsonl._write_all

def dying_write_all(fd, data):
    if len(data) > 100_000:  # the big batch: half of it reaches the file, then death
        real_write_all(fd, data[: len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    real_write_all(fd, data)

jsonl._write_all = dying_write_all

async def main(path, sid, parent):
    store = await jsonl.JsonlStore.open(path, fsync=False)
    batch, prev = [], (parent or None)
    for i in range(2000):
        entry = message_entry(sid, "user", "x" * 100, parent_id=prev, entry_id=f"{sid}.{i}")
        batch.append(entry)
        prev = entry.id
    await store.append_many(batch)

asyncio.run(main(*sys.argv[1:]))
"""


def _killed_import(directory: Path, sid: str, parent: str = "") -> None:
    result = subprocess.run(
        [sys.executable, "-c", KILLED_IMPORT, str(directory), sid, parent],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr


async def test_a_writer_removes_the_debris_of_a_killed_import(tmp_path: Path) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append_many(chain("old", 3))
    committed = (tmp_path / "old.jsonl").stat().st_size
    _killed_import(tmp_path, "new")  # a new session: its first batch never committed
    assert (tmp_path / "new.jsonl").stat().st_size > 100_000
    # The next writer (killed too) first removes that: the new session had no entry.
    _killed_import(tmp_path, "old", "old-2")  # an existing one: a batch beyond its end
    assert "new.jsonl" not in names(tmp_path) and "new.leaf.json" not in names(tmp_path)
    assert (tmp_path / "old.jsonl").stat().st_size > committed + 100_000
    async with await JsonlStore.open(tmp_path, fsync=False, read_only=True) as reader:
        assert await reader.sessions() == ["old"]
        assert len(await reader.list("old")) == 3
    assert (tmp_path / "old.jsonl").stat().st_size > committed  # readers never delete
    async with await JsonlStore.open(tmp_path, fsync=False) as writer:
        await writer.append_many(chain("other", 2))  # a write to another session cleans up
    assert (tmp_path / "old.jsonl").stat().st_size == committed
    _killed_import(tmp_path, "new")
    async with await JsonlStore.open(tmp_path, fsync=False) as writer:
        await writer.append(msg("other", "o2", "other-1"))
        assert await writer.sessions() == ["old", "other"]
    assert "new.jsonl" not in names(tmp_path) and "new.leaf.json" not in names(tmp_path)
    assert not [n for n in names(tmp_path) if n.endswith(".tmp")]


async def test_debris_of_a_live_writer_is_never_touched(tmp_path: Path) -> None:
    import fcntl

    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append_many(chain("s", 2))
    committed = (tmp_path / "s.jsonl").stat().st_size
    with (tmp_path / "s.jsonl").open("ab") as data:
        data.write(b"x" * 1000)  # a batch being written right now...
    with (tmp_path / ".lock").open("r+b") as lock:
        lock.seek(32)
        lock.write(b"pending s\n")  # ...by a writer that holds the lock
        lock.flush()
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            async with await JsonlStore.open(
                tmp_path, fsync=False, lock_timeout=0.2, read_only=True
            ) as reader:
                assert len(await reader.list("s")) == 2
            with pytest.raises(StoreBusyError):
                await JsonlStore.open(tmp_path, fsync=False, lock_timeout=0.2)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    assert (tmp_path / "s.jsonl").stat().st_size == committed + 1000


async def test_a_lost_data_file_is_reported_and_repaired(tmp_path: Path) -> None:
    await two_sessions(tmp_path, 5)
    (tmp_path / "bad.jsonl").unlink()
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert await store.sessions() == ["good", "bad"]
        with pytest.raises(CorruptStoreError, match=r"'bad'.* 0 bytes.* committed bytes"):
            await store.list("bad")
        with pytest.raises(CorruptStoreError, match="'bad'"):
            await store.append(msg("bad", "x", None))  # no new root over lost entries
        found = {c.session_id: c for c in await store.check()}
        assert found["good"].problem is None and found["bad"].problem is not None
        repaired = {c.session_id: c for c in await store.repair(tmp_path.parent / "bk")}
        assert repaired["bad"].lost_entries == 5
        assert (tmp_path.parent / "bk" / "bad.leaf.json").exists()
        assert await store.sessions() == ["good"]
        await store.append(msg("bad", "x", None))  # a fresh session may now start


async def test_the_first_write_sweeps_debris_no_record_names(tmp_path: Path) -> None:
    """Debris older than the ``.lock`` record (a power cut, an older version) goes too."""
    await two_sessions(tmp_path, 3)
    committed = (tmp_path / "bad.jsonl").stat().st_size
    with (tmp_path / "bad.jsonl").open("ab") as f:
        f.write(b"x" * 5000)
    (tmp_path / "ghost.jsonl").write_bytes(b"y" * 5000)  # a first batch that never committed
    (tmp_path / "ghost.leaf.json").write_text('{"leaf": null, "committedBytes": 0}')
    (tmp_path / ".good.leaf.json.tmp").write_text("{}")
    async with await JsonlStore.open(tmp_path, fsync=False, read_only=True) as reader:
        assert await reader.sessions() == ["good", "bad"]
    assert (tmp_path / "bad.jsonl").stat().st_size == committed + 5000  # readers never cut
    async with await JsonlStore.open(tmp_path, fsync=False) as writer:
        await writer.append(msg("good", "more", "good-2"))
        assert len(await writer.list("bad")) == 3
    assert (tmp_path / "bad.jsonl").stat().st_size == committed
    assert names(tmp_path) == [
        ".lock",
        ".sessions",
        "bad.jsonl",
        "bad.leaf.json",
        "good.jsonl",
        "good.leaf.json",
    ]


async def test_a_leaf_from_the_sidecar_equals_the_loaded_one(tmp_path: Path) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append_many(chain("s", 4))
        await store.checkout("s", "s-1")
        await store.append_many(chain("t", 2))
    path, side = tmp_path / "t.jsonl", json.loads((tmp_path / "t.leaf.json").read_text())
    async with await JsonlStore.open(tmp_path, read_only=True) as store:
        assert await store.leaf("s") == "s-1"
        assert await store.leaf("nosuch") is None
    # A committed length off a line end: the sidecar does not describe the file, so the
    # leaf comes from loading it (its last complete entry), as every read would say.
    path.write_bytes(path.read_bytes() + b"\n")
    (tmp_path / "t.leaf.json").write_text(json.dumps({**side, "committedBytes": 5}))
    async with await JsonlStore.open(tmp_path, read_only=True) as store:
        assert await store.leaf("t") == "t-1" == (await store.entries("t"))[-1].id
    path.write_bytes(path.read_bytes()[:-40])  # and a cut file is damage, not a leaf
    (tmp_path / "t.leaf.json").write_text(json.dumps(side))
    async with await JsonlStore.open(tmp_path, read_only=True) as store:
        with pytest.raises(CorruptStoreError, match="'t'"):
            await store.leaf("t")
