"""The JSONL adapter's own promises: recovery, corruption, crashes and other processes.

The rules every adapter shares are in the conformance suite; this file covers what only
a directory of files can get wrong.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from prism_om.entries import SessionEntry, message_entry
from prism_om.errors import (
    CorruptStoreError,
    InvalidSessionIdError,
    StoreBusyError,
    StoreError,
)
from prism_om.stores import open_store
from prism_om.stores.jsonl import JsonlStore
from prism_om.stores.jsonl import store as jsonl_module
from prism_om.testing.conformance import snapshot

WORKER = Path(__file__).resolve().parents[1] / "support" / "crash_worker_jsonl.py"
MULTIBYTE = "naïve — 日本語 👋"


def msg(sid: str, eid: str, parent: str | None, text: str = MULTIBYTE) -> SessionEntry:
    return message_entry(sid, "user", text, parent_id=parent, entry_id=eid)


def run_worker(*args: str) -> None:
    subprocess.run([sys.executable, str(WORKER), *args], check=True, timeout=120)


def sidecar(directory: Path, sid: str) -> dict[str, object]:
    value: dict[str, object] = json.loads((directory / f"{sid}.leaf.json").read_bytes())
    return value


def assert_clean_file(path: Path) -> None:
    """Every line of the file is a whole entry and the file ends with a newline."""
    data = path.read_bytes()
    assert data.endswith(b"\n")
    for line in data.splitlines():
        SessionEntry.model_validate_json(line)


def all_files(directory: Path) -> list[Path]:
    return sorted(directory.rglob("*"))


async def ids(store: JsonlStore, sid: str) -> list[str]:
    return [e.id for e in await store.list(sid)]


# -- layout ---------------------------------------------------------------------------------


async def test_layout_and_url(tmp_path: Path) -> None:
    directory = tmp_path / "made" / "here"
    async with await JsonlStore.open(directory) as store:
        assert store.url == f"jsonl:{directory}"
        await store.append_many([msg("s1", "a", None), msg("s1", "b", "a")])
        await store.append(msg("s2", "x", None))
    assert sorted(p.name for p in directory.iterdir()) == [
        ".lock",
        ".sessions",
        "s1.jsonl",
        "s1.leaf.json",
        "s2.jsonl",
        "s2.leaf.json",
    ]
    lines = (directory / "s1.jsonl").read_bytes().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "b"]
    assert json.loads(lines[0])["message"]["content"] == MULTIBYTE
    stamp = json.loads(lines[1])["timestamp"]
    assert sidecar(directory, "s1") == {
        "leaf": "b",
        "committedBytes": (directory / "s1.jsonl").stat().st_size,
        "version": 2,
        "entries": 2,
        "messages": 2,
        "leaves": 1,
        "lastActivity": stamp,
    }
    assert (directory / ".sessions").read_text() == "s1\ns2\n"
    async with await open_store(f"jsonl:{directory}") as reopened:
        assert await reopened.sessions() == ["s1", "s2"]


async def test_hand_made_file_without_sidecar(tmp_path: Path) -> None:
    lines = [msg("hand", "h1", None).to_json(), msg("hand", "h2", "h1").to_json()]
    (tmp_path / "hand.jsonl").write_text("\n".join(lines) + "\n\n")  # a blank line too
    (tmp_path / "README.md").write_text("not a session")
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert await store.sessions() == ["hand"]
        assert await store.leaf("hand") == "h2"
        with (tmp_path / "hand.jsonl").open("a") as f:  # edited by hand while open
            f.write(msg("hand", "h2b", "h2").to_json() + "\n")
        await store.append(msg("hand", "h3", "h2b"))  # the writer looks at its file anyway
    assert sidecar(tmp_path, "hand")["leaf"] == "h3"
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert await ids(store, "hand") == ["h1", "h2", "h2b", "h3"]
        assert await store.leaves("hand") == ["h3"]


# -- interrupted appends ----------------------------------------------------------------------


def _base_store(tmp_path: Path) -> tuple[bytes, bytes, dict[str, object]]:
    """A session a <- b <- c written by the store: (bytes before c's line, c's line, sidecar)."""

    async def build() -> None:
        async with await JsonlStore.open(tmp_path / "base", fsync=False) as store:
            await store.append_many([msg("s", "a", None), msg("s", "b", "a")])
            await store.append(msg("s", "c", "b"))

    asyncio.run(build())
    data = (tmp_path / "base" / "s.jsonl").read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    return data[:start], data[start:-1], sidecar(tmp_path / "base", "s")


def _write_case(directory: Path, body: bytes, side: dict[str, object] | None) -> None:
    directory.mkdir()
    (directory / "s.jsonl").write_bytes(body)
    (directory / ".sessions").write_text("s\n")
    if side is not None:
        (directory / "s.leaf.json").write_text(json.dumps(side))


async def _reopen_append_reopen(directory: Path, expected: list[str]) -> None:
    async with await JsonlStore.open(directory, fsync=False) as store:
        assert await ids(store, "s") == expected
        assert await store.leaf("s") == expected[-1]
        await store.append(msg("s", "z", expected[-1]))
        assert await ids(store, "s") == [*expected, "z"]
    async with await JsonlStore.open(directory, fsync=False) as store:
        assert await ids(store, "s") == [*expected, "z"]
        assert [e.id for e in await store.entries("s")] == [*expected, "z"]
    assert_clean_file(directory / "s.jsonl")


def file_bytes(directory: Path) -> dict[str, bytes]:
    """Every file's bytes but the lock's (whose counter readers may not touch anyway)."""
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name != ".lock"}


async def _refuse_lost_data(directory: Path, size: int, committed: object) -> None:
    before = file_bytes(directory)
    async with await JsonlStore.open(directory, fsync=False) as store:
        lost = rf"'s'.* {size} bytes.* {committed} committed"
        with pytest.raises(CorruptStoreError, match=lost):
            await store.list("s")
        with pytest.raises(CorruptStoreError, match=lost):
            await store.append(msg("s", "z", "a"))
    assert file_bytes(directory) == before


async def test_last_line_cut_at_every_offset(tmp_path: Path) -> None:
    """A cut anywhere in the last line keeps every complete entry, with or without sidecar.

    * ``none``: no sidecar (a hand-made file): complete lines count, and a last line that
      lacks only its newline is a complete entry;
    * ``stale``: the sidecar claims more bytes than the file holds: committed data was
      lost, which is ``CorruptStoreError`` (naming both byte counts) and no write touches
      the file;
    * ``committed``: the sidecar commits a and b only: c's bytes are an interrupted batch
      and go, even when the whole line (and its newline) made it to disk.
    """
    head, last, full_side = await asyncio.to_thread(_base_store, tmp_path)
    head_side = {"leaf": "b", "committedBytes": len(head)}
    assert len(last) > len(MULTIBYTE)  # the cut walks through multi-byte characters too
    for cut in range(len(last) + 2):
        body = head + (last + b"\n")[:cut]
        whole = cut >= len(last)
        for variant, side in (("none", None), ("stale", full_side), ("committed", head_side)):
            if variant == "stale" and cut == len(last) + 1:
                continue  # the untouched file: not a cut
            case = tmp_path / f"{variant}-{cut}"
            _write_case(case, body, side)
            if variant == "stale":
                await _refuse_lost_data(case, len(body), full_side["committedBytes"])
                continue
            expected = ["a", "b", "c"] if whole and variant != "committed" else ["a", "b"]
            await _reopen_append_reopen(case, expected)


def test_the_cut_walk_splits_characters(tmp_path: Path) -> None:
    _, last, _ = _base_store(tmp_path)
    inside = last.index("日".encode()) + 1
    with pytest.raises(UnicodeDecodeError):
        last[:inside].decode()


@pytest.mark.parametrize("cut", ["none", "mid-character", "whole-entry", "after-newline"])
async def test_nul_padding_is_an_interrupted_append(tmp_path: Path, cut: str) -> None:
    head, last, _ = await asyncio.to_thread(_base_store, tmp_path)
    keep = {
        "none": b"",
        "mid-character": last[: last.index("日".encode()) + 2],
        "whole-entry": last,
        "after-newline": last + b"\n",
    }[cut]
    _write_case(tmp_path / "case", head + keep + b"\0" * 4096, None)
    expected = ["a", "b", "c"] if cut in {"whole-entry", "after-newline"} else ["a", "b"]
    await _reopen_append_reopen(tmp_path / "case", expected)


async def test_reader_ignores_an_interrupted_batch_until_a_writer_cuts_it(tmp_path: Path) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append(msg("s", "a", None))
        committed = (tmp_path / "s.jsonl").stat().st_size
        junk = msg("s", "half", "a").to_json().encode()
        with (tmp_path / "s.jsonl").open("ab") as f:
            f.write(junk + b"\n" + junk[:20])  # a whole line and a cut one, never committed
        async with await JsonlStore.open(tmp_path, fsync=False) as other:
            assert await ids(other, "s") == ["a"]
            assert (tmp_path / "s.jsonl").stat().st_size > committed  # readers do not write
        await store.append(msg("s", "b", "a"))
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        assert await ids(store, "s") == ["a", "b"]
    assert_clean_file(tmp_path / "s.jsonl")


# -- corruption -------------------------------------------------------------------------------


def _lines(*entries: SessionEntry) -> list[bytes]:
    return [e.to_json().encode() for e in entries]


@pytest.mark.parametrize(
    ("damage", "line", "words"),
    [
        ("malformed", 2, "line 2"),
        ("nul-line", 2, "line 2"),
        ("unknown-parent", 3, "'ghost'"),
        ("other-session", 2, "belongs to session 'elsewhere'"),
        ("second-root", 3, "already has its root"),
        ("duplicate", 3, "already exists"),
    ],
)
async def test_damage_in_the_middle_names_file_and_line(
    tmp_path: Path, damage: str, line: int, words: str
) -> None:
    good = _lines(msg("s", "a", None), msg("s", "b", "a"), msg("s", "c", "b"))
    bad = {
        "malformed": [good[0], b'{"id": "b", "sessionId": ', good[2]],
        "nul-line": [good[0], b"\0" * 30, good[2]],
        "unknown-parent": [*good[:2], *_lines(msg("s", "c", "ghost"))],
        "other-session": [good[0], *_lines(msg("elsewhere", "b", "a")), good[2]],
        "second-root": [*good[:2], *_lines(msg("s", "c", None))],
        "duplicate": [*good[:2], good[1]],
    }[damage]
    (tmp_path / "s.jsonl").write_bytes(b"\n".join(bad) + b"\n")
    async with await JsonlStore.open(tmp_path) as store:  # sessions load on first use
        with pytest.raises(CorruptStoreError, match=rf"s\.jsonl line {line}") as info:
            await store.list("s")
    assert words in str(info.value)


async def test_malformed_committed_last_line_is_corruption(tmp_path: Path) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append_many([msg("s", "a", None), msg("s", "b", "a")])
    path = tmp_path / "s.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:-6] + b"xxxxx\n")  # inside the committed length: not a crash
    async with await JsonlStore.open(tmp_path) as store:
        with pytest.raises(CorruptStoreError, match=r"s\.jsonl line 2"):
            await store.list("s")


async def test_corruption_appended_by_another_process_is_reported(tmp_path: Path) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append(msg("s", "a", None))
        path = tmp_path / "s.jsonl"
        with path.open("ab") as f:
            f.write(b"garbage\n" + msg("s", "b", "a").to_json().encode() + b"\n")
        (tmp_path / "s.leaf.json").write_text(
            json.dumps({"leaf": "b", "committedBytes": path.stat().st_size})
        )
        with (tmp_path / ".lock").open("r+b") as lock:  # what a writer would announce
            lock.write(b"%020d\n" % 999)
        with pytest.raises(CorruptStoreError, match=r"s\.jsonl line 2"):
            await store.list("s")


# -- write errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("fail_at", ["data", "sidecar"])
async def test_write_errors_raise_and_leave_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: str
) -> None:
    store = await JsonlStore.open(tmp_path)
    await store.append(msg("s", "a", None))
    before, size = await snapshot(store), (tmp_path / "s.jsonl").stat().st_size
    real_write = jsonl_module._write_all
    calls: list[int] = []

    def failing_write(fd: int, data: bytes) -> None:
        calls.append(len(data))
        if len(calls) == (1 if fail_at == "data" else 2):
            real_write(fd, data[: len(data) // 2])  # half made it to disk, then the disk filled
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(fd, data)

    monkeypatch.setattr(jsonl_module, "_write_all", failing_write)
    with pytest.raises(StoreError, match="No space left"):
        await store.append_many([msg("s", "b", "a"), msg("s", "c", "b")])
    monkeypatch.undo()
    assert await snapshot(store) == before
    assert (tmp_path / "s.jsonl").stat().st_size == size
    await store.append(msg("s", "d", "a"))
    await store.close()
    async with await JsonlStore.open(tmp_path) as store:
        assert await ids(store, "s") == ["a", "d"]
    assert_clean_file(tmp_path / "s.jsonl")


async def test_fsync_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(jsonl_module.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    async with await JsonlStore.open(tmp_path / "fast", fsync=False) as store:
        await store.append(msg("s", "a", None))
        await store.checkout("s", "a")
    assert synced == []
    async with await JsonlStore.open(tmp_path / "safe") as store:
        await store.append(msg("s", "a", None))
    assert len(synced) >= 3  # data, sidecar, directory


async def test_a_held_lock_ends_in_store_busy(tmp_path: Path) -> None:
    store = await JsonlStore.open(tmp_path, lock_timeout=0.2)
    with (tmp_path / ".lock").open("rb") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        with pytest.raises(StoreBusyError):
            await store.append(msg("s", "a", None))
        with pytest.raises(StoreBusyError):
            await store.sessions()
    await store.append(msg("s", "a", None))
    await store.close()


# -- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", "", ".hidden", "/etc/passwd"])
async def test_unsafe_session_ids_write_nothing(tmp_path: Path, bad: str) -> None:
    store_dir = tmp_path / "store"
    async with await JsonlStore.open(store_dir) as store:
        before = all_files(tmp_path)
        entry = msg("ok", "a", None).model_copy(update={"session_id": bad})
        with pytest.raises(InvalidSessionIdError):
            await store.append(entry)
        with pytest.raises(InvalidSessionIdError):
            await store.append_many([entry])
        with pytest.raises(InvalidSessionIdError):
            await store.checkout(bad, "a")
        with pytest.raises(InvalidSessionIdError):
            await store.entries(bad)
        assert all_files(tmp_path) == before
        assert await store.sessions() == []


async def test_symlinked_session_file_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_text(msg("evil", "a", None).to_json() + "\n")
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "evil.jsonl").symlink_to(outside)
    async with await JsonlStore.open(tmp_path / "store") as store:
        with pytest.raises(CorruptStoreError, match="symbolic links"):
            await store.list("evil")
    assert outside.read_text().count("\n") == 1


# -- the leaf ---------------------------------------------------------------------------------


async def test_leaf_survives_reopen_and_the_next_append_forks(tmp_path: Path) -> None:
    async with await JsonlStore.open(tmp_path) as store:
        await store.append_many([msg("s", "a", None), msg("s", "b", "a"), msg("s", "c", "b")])
        await store.checkout("s", "a")
    assert sidecar(tmp_path, "s")["leaf"] == "a"
    async with await JsonlStore.open(tmp_path) as store:
        assert await store.leaf("s") == "a"
        assert [e.id for e in await store.entries("s")] == ["a"]
        await store.append(msg("s", "d", "a"))
    async with await JsonlStore.open(tmp_path) as store:
        assert await store.leaf("s") == "d"
        assert await store.leaves("s") == ["c", "d"]
        assert [e.id for e in await store.entries("s")] == ["a", "d"]
        assert [e.id for e in await store.entries("s", "c")] == ["a", "b", "c"]


async def test_leaf_moves_by_another_store_are_seen(tmp_path: Path) -> None:
    async with (
        await JsonlStore.open(tmp_path, fsync=False) as one,
        await JsonlStore.open(tmp_path, fsync=False) as two,
    ):
        await one.append_many([msg("s", "a", None), msg("s", "b", "a")])
        assert await two.leaf("s") == "b"
        for target in ("a", "b", "a"):  # quick successive moves still show
            await one.checkout("s", target)
            assert await two.leaf("s") == target
        await two.append(msg("s", "c", "a"))
        assert await one.leaves("s") == ["b", "c"]
        assert await one.leaf("s") == "c"


# -- other processes --------------------------------------------------------------------------

READS: dict[str, Callable[[JsonlStore, int], Awaitable[Any]]] = {
    "get": lambda store, n: store.get(f"e{n}"),
    "list": lambda store, n: store.list("s1"),
    "branch": lambda store, n: store.entries("s1"),
    "leaf": lambda store, n: store.leaf("s1"),
    "leaves": lambda store, n: store.leaves("s1"),
    "sessions": lambda store, n: store.sessions(),
}


async def test_another_process_appends_are_seen_before_the_next_read(tmp_path: Path) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.append(msg("s1", "root", None))
        for n, (name, read) in enumerate(READS.items()):
            await asyncio.to_thread(run_worker, "step", str(tmp_path), str(n))
            seen = await read(store, n)
            if name == "get":
                assert seen is not None and seen.id == f"e{n}"
            elif name in {"list", "branch"}:
                assert [e.id for e in seen][-1] == f"e{n}"
            elif name == "leaf":
                assert seen == f"e{n}"
            elif name == "leaves":
                assert seen == [f"e{n}"]
            else:
                assert seen == ["s1", *(f"t{i}" for i in range(n + 1))]
        # and what this process writes next builds on what the other one wrote
        last = len(READS) - 1
        await store.append(msg("s1", "mine", f"e{last}"))
        with pytest.raises(InvalidSessionIdError):
            await store.list("../s1")


@pytest.mark.slow
@pytest.mark.parametrize("shared", [False, True], ids=["own-sessions", "one-session"])
async def test_two_processes_append_concurrently_and_lose_nothing(
    tmp_path: Path, shared: bool
) -> None:
    count = 1000
    if shared:
        async with await JsonlStore.open(tmp_path) as store:
            await store.append(msg("shared", "root", None))
    commands = [
        [
            sys.executable,
            str(WORKER),
            "append",
            str(tmp_path),
            "shared" if shared else f"own{p}",
            f"p{p}",
            str(count),
            *(["root"] if shared else []),
        ]
        for p in (1, 2)
    ]
    procs = [await asyncio.create_subprocess_exec(*command) for command in commands]
    assert [await asyncio.wait_for(p.wait(), 120) for p in procs] == [0, 0]
    async with await JsonlStore.open(tmp_path) as store:
        for p in (1, 2):
            sid = "shared" if shared else f"own{p}"
            mine = [i for i in await ids(store, sid) if i.startswith(f"p{p}-")]
            assert mine == [f"p{p}-{i}" for i in range(count)]
            branch = [e.id for e in await store.entries(sid, f"p{p}-{count - 1}")]
            assert branch == (["root"] if shared else []) + mine
        if shared:
            assert len(await store.list("shared")) == 2 * count + 1
            assert await store.leaves("shared") == sorted(
                [f"p1-{count - 1}", f"p2-{count - 1}"],
                key=[e.id for e in await store.list("shared")].index,
            )
        else:
            assert sorted(await store.sessions()) == ["own1", "own2"]


@pytest.mark.slow
def test_sigkill_mid_append_leaves_whole_batches(tmp_path: Path) -> None:
    rng = random.Random(20240607)
    reported: dict[str, int] = {}
    started = time.monotonic()
    rounds = 0
    while rounds < 9 and time.monotonic() - started < 30:
        out = tmp_path / f"out-{rounds}.txt"
        err = tmp_path / f"err-{rounds}.txt"
        with out.open("wb") as sink, err.open("wb") as sink_err:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    "crash",
                    str(tmp_path / "store"),
                    str(rounds),
                    str(rng.randrange(1 << 30)),
                ],
                stdout=sink,
                stderr=sink_err,
            )
        try:
            _wait_for_ready(proc, out, err)
            time.sleep(rng.uniform(0.05, 0.6))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        for line in out.read_text().splitlines():
            if line.startswith("committed "):
                _, batch_id, size = line.split()
                reported[batch_id] = int(size)
        rounds += 1
    assert reported, "the worker never committed a batch"
    asyncio.run(_check_whole_batches(tmp_path / "store", reported))


def _wait_for_ready(proc: subprocess.Popen[bytes], out: Path, err: Path) -> None:
    deadline = time.monotonic() + 60
    while b"ready" not in out.read_bytes():
        if proc.poll() is not None:
            raise AssertionError(f"worker exited with {proc.returncode}: {err.read_text()}")
        assert time.monotonic() < deadline, "worker did not start"
        time.sleep(0.02)


async def _check_whole_batches(directory: Path, reported: dict[str, int]) -> None:
    async with await JsonlStore.open(directory) as store:
        entries = await store.list("crash")
        batches: dict[str, list[SessionEntry]] = {}
        for entry in entries:
            batches.setdefault(entry.id.rsplit(".", 1)[0], []).append(entry)
        for batch_id, members in batches.items():
            assert members[0].message is not None
            size = int(str(members[0].message.content).split()[0])
            assert [e.id for e in members] == [f"{batch_id}.{i}" for i in range(size)]
        assert set(reported) <= set(batches)
        for batch_id, size in reported.items():
            assert len(batches[batch_id]) == size
        # one chain, resumed from the persisted leaf after every crash
        assert [e.id for e in await store.entries("crash")] == [e.id for e in entries]
        await store.append(msg("crash", "after", entries[-1].id))
    assert_clean_file(directory / "crash.jsonl")
