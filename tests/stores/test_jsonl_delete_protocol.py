"""JSONL ``delete_session`` is atomic for every reader and resumable after a kill.

A delete first commits its intent (the session's sidecar, replaced by one that says
``deleting``), then zeroes and unlinks the files, the sidecar last. A lockless reader in
another process sees the session whole or gone, never a zeroed or half-zeroed file; a
deleter killed at any step leaves the session whole (before the commit) or gone (after
it), ``check`` clean, and a retry or the next writer erases what is left.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.store_builders import cli

from prism_om.entries import message_entry
from prism_om.errors import SessionNotFoundError, StoreError
from prism_om.session import Session
from prism_om.stores.jsonl import JsonlStore

WORKER = Path(__file__).resolve().parents[1] / "support" / "delete_worker_jsonl.py"
ERASED = b"ERASE-ME-q7z3"
ENTRIES = 120


def _start(*args: str, stdin: int | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _worker(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, str(WORKER), *args], capture_output=True, check=False, timeout=120
    )


async def _fill(directory: Path) -> list[str]:
    """s1: ENTRIES messages carrying ERASED (~40 KB, ten zeroing writes); s2: two kept."""
    async with await JsonlStore.open(directory) as store:
        batch = []
        for i in range(ENTRIES):
            parent = batch[-1].id if batch else None
            text = f"{ERASED.decode()} {i} " + "dolor sit amet " * 20
            batch.append(message_entry("s1", "user", text, parent_id=parent, entry_id=f"s1.{i}"))
        await store.append_many(batch[:60])
        await store.append_many(batch[60:])
        for text in ("kept one", "kept two"):
            await Session(store, "s2").append_message("user", text)
        return [e.id for e in batch]


def _holding_erased(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ERASED in p.read_bytes())


async def _whole_or_gone(directory: Path, s1_ids: list[str], s2: int = 2) -> bool:
    """What a lockless reader sees: True for s1 whole, False for gone; check is clean."""
    async with await JsonlStore.open(directory, read_only=True) as reader:
        ids = [e.id for e in await reader.list("s1")]
        assert ids in (s1_ids, []), f"s1 partly readable: {len(ids)} of {len(s1_ids)}"
        whole = bool(ids)
        assert await reader.sessions() == (["s1", "s2"] if whole else ["s2"])
        assert (await reader.leaf("s1") is not None) == whole
        summaries = {s.session_id: s.entries for s in await reader.session_summaries()}
        assert summaries == ({"s1": len(s1_ids), "s2": s2} if whole else {"s2": s2})
        kept = [e.message.content for e in await reader.list("s2")]  # type: ignore[union-attr]
        assert kept == ["kept one", "kept two", "more"][:s2]
        assert [(c.session_id, c.problem) for c in await reader.check() if c.problem] == []
        return whole


def _steps(template: Path, work: Path) -> int:
    """How many file-changing calls one whole delete of s1 makes."""
    copy = work / "count"
    shutil.copytree(template, copy)
    done = _worker("kill", str(copy), "s1", "1000000")
    assert done.returncode == 0, done.stderr.decode()
    assert not (copy / "s1.jsonl").exists()
    steps = int(done.stdout.split()[-1])
    return steps


async def test_a_delete_killed_at_every_step_leaves_the_session_whole_or_gone(
    tmp_path: Path,
) -> None:
    template = tmp_path / "template"
    s1_ids = await _fill(template)
    steps = _steps(template, tmp_path)
    copies = []
    for step in range(1, steps + 1):
        copies.append(tmp_path / f"step{step}")
        shutil.copytree(template, copies[-1])
    with ThreadPoolExecutor(2) as pool:
        runs = list(
            pool.map(
                lambda pair: _worker("kill", str(pair[1]), "s1", str(pair[0])), enumerate(copies, 1)
            )
        )
    seen_whole = seen_gone = 0
    for step, (copy, run) in enumerate(zip(copies, runs, strict=True), 1):
        assert run.returncode == 9, (step, run.stderr.decode())
        whole = await _whole_or_gone(copy, s1_ids)
        seen_whole += whole
        seen_gone += not whole
        async with await JsonlStore.open(copy) as store:
            if step % 2:
                # The next writer of any session finishes an interrupted erasure...
                await Session(store, "s2").append_message("user", "more")
                if not whole:
                    assert _holding_erased(copy) == [], step
            # ...and so does a retried delete, which says how many entries went.
            try:
                assert await store.delete_session("s1") == ENTRIES
            except SessionNotFoundError:
                # Only once the kill came after the last file was gone.
                assert not whole and not [p for p in copy.iterdir() if "s1" in p.name], step
        assert _holding_erased(copy) == [], step
        assert not await _whole_or_gone(copy, s1_ids, 3 if step % 2 else 2)
    # The kills fell both before the commit and after it.
    assert seen_whole and seen_gone


def test_a_retried_cli_delete_finishes_an_interrupted_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    asyncio.run(_fill(store))
    (tmp_path / "work").mkdir()
    steps = _steps(store, tmp_path / "work")
    # Half way through the zeroing: the file holds zeroes and text both.
    assert _worker("kill", str(store), "s1", str(steps // 2)).returncode == 9
    data = (store / "s1.jsonl").read_bytes()
    assert ERASED in data and b"\0" in data
    assert _holding_erased(store) == ["s1.jsonl"]
    code, out, err = cli(capsys, "delete", "s1", "--db", f"jsonl:{store}", "--yes")
    assert code == 0, err
    assert "finished deleting session s1" in out and f"{ENTRIES} entries" in out
    assert _holding_erased(store) == []
    code, out, err = cli(capsys, "delete", "s1", "--db", f"jsonl:{store}", "--yes")
    assert code == 2 and "no session 's1'" in err


async def _reads(reader: JsonlStore, s1_ids: list[str]) -> bool:
    """A lockless reader's view of s1 (True: whole) after checking it is whole or gone."""
    ids = [e.id for e in await reader.list("s1")]
    assert ids in (s1_ids, []), f"s1 partly readable: {len(ids)} of {len(s1_ids)}"
    whole = bool(ids)
    assert await reader.sessions() == (["s1", "s2"] if whole else ["s2"])
    assert (await reader.leaf("s1") is not None) == whole
    assert [s.session_id for s in await reader.session_summaries()] == await reader.sessions()
    assert [(c.session_id, c.problem) for c in await reader.check() if c.problem] == []
    return whole


async def test_a_lockless_reader_between_and_across_each_step_of_a_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process deletes s1 one file change at a time. Before each change, readers
    of a ``read_only`` store (one that had s1 loaded, and a fresh one) find s1 whole or
    gone; then a fresh reader reads s1's sidecar, the deleter makes its next change, and
    the reader reads the data: whole or gone too, never damage. Once gone, it stays gone."""
    s1_ids = await _fill(tmp_path)
    proc = _start("pause", str(tmp_path), "s1", stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def advance() -> bytes:
        stdin.write(b"go\n")
        stdin.flush()
        return stdout.readline().strip()

    real_stat = os.stat
    try:
        assert stdout.readline().strip() == b"ready"
        at = stdout.readline().strip()
        steps, gone = 0, False
        async with await JsonlStore.open(tmp_path, read_only=True) as loaded:
            assert await _reads(loaded, s1_ids)
            while at != b"done":
                assert at == b"step %d" % (steps + 1), at
                steps += 1
                async with await JsonlStore.open(tmp_path, read_only=True) as fresh:
                    views = {await _reads(loaded, s1_ids), await _reads(fresh, s1_ids)}
                assert len(views) == 1 and not (gone and True in views), (steps, views)
                gone = views == {False}
                moved = False

                def stat_then_step(path: object, *args: object, **kwargs: object) -> object:
                    nonlocal at, moved
                    if path == "s1.jsonl" and not moved:
                        moved, at = True, advance()
                    return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

                async with await JsonlStore.open(tmp_path, read_only=True) as across:
                    monkeypatch.setattr(os, "stat", stat_then_step)
                    ids = [e.id for e in await across.list("s1")]
                    monkeypatch.setattr(os, "stat", real_stat)
                    assert ids in (s1_ids, []), (steps, len(ids))
                    if not moved:
                        at = advance()
            assert not await _reads(loaded, s1_ids)
    finally:
        monkeypatch.setattr(os, "stat", real_stat)
        proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert steps > 15 and _holding_erased(tmp_path) == []


async def test_a_lockless_reader_racing_deletes_never_sees_damage(tmp_path: Path) -> None:
    """Another process writes and deletes one session over and over; a read-only store
    reads it throughout. Each read finds it whole (one round's entries, all of them) or
    gone: never a zeroed file read as corrupt, never part of a session."""
    rounds, entries = 60, 400
    directory = tmp_path / "store"
    directory.mkdir()
    proc = _start("churn", str(directory), "race", str(rounds), str(entries))
    failures: list[str] = []
    reads = 0
    try:
        async with await JsonlStore.open(directory, read_only=True) as reader:
            while proc.poll() is None:
                try:
                    ids = [e.id for e in await reader.list("race")]
                    listed = await reader.sessions()
                    await reader.leaf("race")
                except StoreError as exc:
                    failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                finally:
                    reads += 1
                if ids:
                    rounds_seen = {i.split(".")[0] for i in ids}
                    if len(ids) != entries or len(rounds_seen) != 1:
                        failures.append(f"partly readable: {len(ids)} entries of {rounds_seen}")
                assert listed in ([], ["race"])
                await asyncio.sleep(0)
    finally:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert out.decode().split()[-1] == str(rounds - 1)
    assert failures == [], f"{len(failures)} of {reads} reads failed, first: {failures[0]}"
    assert reads >= rounds
