"""Read-only and no-create opens of SQLite stores (issue 13 item 6), through the API, the
CLI, and as an unprivileged user: as root, permission checks pass vacuously."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.other_user import reachable_dir

from prism_om.entries import message_entry
from prism_om.errors import ReadOnlyStoreError, StoreNotFoundError
from prism_om.stores import open_store
from prism_om.stores.sqlite import SqliteStore


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def make_store(path: Path, sessions: int = 2) -> None:
    async with await SqliteStore.open(path) as store:
        for n in range(sessions):
            parent = None
            for m in range(3):
                entry = message_entry(
                    f"s{n}", "user", f"hello {n}.{m}", parent_id=parent, entry_id=f"e{n}.{m}"
                )
                await store.append(entry)
                parent = entry.id


async def test_read_only_and_no_create_opens_never_make_a_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    for options in ({"read_only": True}, {"create": False}, {"read_only": True, "create": False}):
        with pytest.raises(StoreNotFoundError, match=r"missing\.db"):
            await open_store(f"sqlite:{missing}", **options)
    assert files_in(tmp_path) == []


async def test_an_empty_file_stays_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    for options in ({"read_only": True}, {"create": False}):
        with pytest.raises(StoreNotFoundError, match=r"empty\.txt.*empty"):
            await SqliteStore.open(empty, **options)
        assert empty.read_bytes() == b""
        assert files_in(tmp_path) == ["empty.txt"]


async def test_read_only_store_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    await make_store(path)
    before = digest(path)
    async with await open_store(f"sqlite:{path}", read_only=True) as store:
        assert await store.sessions() == ["s0", "s1"]
        assert [e.id for e in await store.entries("s1")] == ["e1.0", "e1.1", "e1.2"]
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            await store.append(message_entry("s9", "user", "no", entry_id="x"))
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            await store.checkout("s0", "e0.0")
        assert await store.leaf("s0") == "e0.2"
    assert digest(path) == before
    # Where it may, a WAL reader makes SQLite's shared-memory files; it writes nothing.
    assert set(files_in(tmp_path)) <= {"s.db", "s.db-wal", "s.db-shm"}
    wal = tmp_path / "s.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0


async def test_read_only_reader_sees_committed_wal_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with await SqliteStore.open(path) as writer:
        await writer.append(message_entry("s", "user", "a", entry_id="a"))
        # The writer is still open, so the entry sits in the WAL, not yet in the file.
        assert (tmp_path / "s.db-wal").stat().st_size > 0
        async with await SqliteStore.open(path, read_only=True) as reader:
            assert [e.id for e in await reader.list("s")] == ["a"]


# -- as an unprivileged user -------------------------------------------------------------

SCRIPT = """
import asyncio, sys
from prism_om.errors import PrismMemoryError
from prism_om.stores import open_store

async def main(url):
    try:
        async with await open_store(url, read_only=True, create=False) as store:
            for sid in await store.sessions():
                print(sid, len(await store.list(sid)))
            print("summaries", [s.entries for s in await store.session_summaries()])
    except PrismMemoryError as exc:
        print(type(exc).__name__, exc)

asyncio.run(main(sys.argv[1]))
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the user nobody can reach (pytest's tmp_path is private to root)."""
    with reachable_dir("prism-ro-") as where:
        yield where


def test_nobody_reads_a_store_in_a_read_only_directory(
    shared_dir: Path, nobody_python: list[str]
) -> None:
    command = nobody_python
    store_dir = shared_dir / "store"
    store_dir.mkdir()
    path = store_dir / "s.db"
    asyncio.run(make_store(path))
    path.chmod(0o644)
    store_dir.chmod(0o555)  # nobody may not create the -shm file here
    before = digest(path)
    done = subprocess.run(
        [*command, "-c", SCRIPT, f"sqlite:{path}"],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["s0 3", "s1 3", "summaries [3, 3]"]
    assert digest(path) == before
    assert files_in(store_dir) == ["s.db"]


def test_nobody_is_told_when_committed_writes_wait_in_the_wal(
    shared_dir: Path, nobody_python: list[str]
) -> None:
    command = nobody_python
    store_dir = shared_dir / "store"
    store_dir.mkdir()
    path = store_dir / "s.db"
    asyncio.run(make_store(path))
    # Leave a committed write in the WAL, with no -shm file: an immutable open would read
    # the file without it, so a silent fallback would miss the write. The writer exits
    # without closing, so nothing checkpoints the WAL.
    crash = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "c.execute(\"UPDATE sessions SET created_at = 'changed'\")\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", crash, str(path)], check=True, timeout=60)
    assert (store_dir / "s.db-wal").stat().st_size > 0
    for name in files_in(store_dir):
        (store_dir / name).chmod(0o644)
    (store_dir / "s.db-shm").unlink(missing_ok=True)
    store_dir.chmod(0o555)
    done = subprocess.run(
        [*command, "-c", SCRIPT, f"sqlite:{path}"],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("StoreError"), done.stdout
    assert "s.db-wal" in done.stdout and "write access" in done.stdout


def test_nobody_runs_read_commands_on_a_read_only_store(
    shared_dir: Path, nobody_python: list[str]
) -> None:
    command = nobody_python
    store_dir = shared_dir / "store"
    store_dir.mkdir()
    path = store_dir / "s.db"
    asyncio.run(make_store(path))
    path.chmod(0o644)
    store_dir.chmod(0o555)
    cli = [*command, "-m", "prism_om.cli"]
    env_cwd = "/"
    listed = subprocess.run(
        [*cli, "sessions", "--json", "--db", str(path)],
        capture_output=True,
        text=True,
        cwd=env_cwd,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert '"entries": 3' in listed.stdout
    viewed = subprocess.run(
        [*cli, "view", "--session", "s0", "--db", str(path)],
        capture_output=True,
        text=True,
        cwd=env_cwd,
        timeout=120,
    )
    assert viewed.returncode == 0, viewed.stderr
    assert files_in(store_dir) == ["s.db"]
