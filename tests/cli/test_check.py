"""``prism-om check [--repair]`` on JSONL and SQLite stores, and ``sessions`` next to damage
(issue 13 items 4 and 5)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path

import pytest
from support.store_builders import build, cli

from prism_om.entries import message_entry
from prism_om.stores import open_store
from prism_om.stores.jsonl import JsonlStore


def entry_ids(url: str, sid: str) -> list[str]:
    async def run() -> list[str]:
        async with await open_store(url) as store:
            return [e.id for e in await store.list(sid)]

    return asyncio.run(run())


# -- JSONL ------------------------------------------------------------------------------------


@pytest.fixture
def damaged_jsonl(tmp_path: Path) -> Path:
    """s1 healthy; s2 cut to half its committed bytes; s3 with a garbage line 31 of 60."""
    store = tmp_path / "store"
    build(f"jsonl:{store}", {"s1": 20, "s2": 40, "s3": 60})
    s2 = store / "s2.jsonl"
    s2.write_bytes(s2.read_bytes()[: s2.stat().st_size // 2])
    s3 = store / "s3.jsonl"
    lines = s3.read_bytes().splitlines(keepends=True)
    lines[30] = b"{" + b"#" * (len(lines[30]) - 2) + b"\n"  # same length: inside commits
    s3.write_bytes(b"".join(lines))
    return store


def test_check_reports_each_damaged_session_and_writes_nothing(
    damaged_jsonl: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {p.name: p.read_bytes() for p in damaged_jsonl.iterdir()}
    code, out, err = cli(capsys, "check", "--db", f"jsonl:{damaged_jsonl}", "--json")
    assert code == 1
    assert "2 damaged session(s)" in err and "s2, s3" in err
    report = {s["session"]: s for s in json.loads(out)["sessions"]}
    assert report["s1"]["ok"] and report["s1"]["entries"] == 20
    assert not report["s2"]["ok"] and "committed bytes" in report["s2"]["problem"]
    assert not report["s3"]["ok"] and "line 31" in report["s3"]["problem"]
    assert report["s3"]["entries"] == 30
    after = {p.name: p.read_bytes() for p in damaged_jsonl.iterdir()}
    assert after == before  # a check writes nothing, not even a lock file's counter
    # ``sessions`` reads sidecars only: it sees the lost bytes of s2 (a size against the
    # sidecar), while a bad line inside s3's committed bytes needs ``check``'s full read.
    code, out, err = cli(capsys, "sessions", "--db", f"jsonl:{damaged_jsonl}", "--json")
    assert code == 1 and "'s2'" in err and "committed bytes" in err
    assert [(r["session"], r["entries"]) for r in json.loads(out)] == [("s1", 20), ("s3", 60)]


def test_repair_backs_up_cuts_back_and_counts_the_loss(
    damaged_jsonl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals = {n: (damaged_jsonl / n).read_bytes() for n in ("s2.jsonl", "s3.jsonl")}
    backup = tmp_path / "backup"
    url = f"jsonl:{damaged_jsonl}"
    code, out, err = cli(capsys, "check", "--db", url, "--repair", "--backup", str(backup))
    assert code == 0, err
    assert "kept 30 entries, lost 30 entries" in " ".join(out.split())  # s3
    assert {n: (backup / n).read_bytes() for n in originals} == originals
    assert (backup / "s2.leaf.json").exists()
    s2_kept = entry_ids(url, "s2")
    assert 0 < len(s2_kept) < 40 and s2_kept == [f"s2-{i}" for i in range(len(s2_kept))]
    assert f"kept {len(s2_kept)} entries, lost {40 - len(s2_kept)} entries" in " ".join(out.split())
    assert entry_ids(url, "s3") == [f"s3-{i}" for i in range(30)]
    assert entry_ids(url, "s1") == [f"s1-{i}" for i in range(20)]
    code, out, _ = cli(capsys, "check", "--db", url)
    assert code == 0 and out.count("ok ") == 3

    async def append_after_repair() -> str | None:
        async with await JsonlStore.open(damaged_jsonl) as store:
            await store.append(
                message_entry("s3", "user", "after", parent_id="s3-29", entry_id="new")
            )
            return await store.leaf("s3")

    assert asyncio.run(append_after_repair()) == "new"


def test_repair_moves_a_symlink_out_of_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    build(f"jsonl:{store}", {"s1": 3})
    outside = tmp_path / "outside.jsonl"
    outside.write_text("not ours\n")
    (store / "evil.jsonl").symlink_to(outside)
    code, _, err = cli(capsys, "check", "--db", f"jsonl:{store}")
    assert code == 1 and "evil" in err
    backup = tmp_path / "b"
    code, _, err = cli(
        capsys, "check", "--db", f"jsonl:{store}", "--repair", "--backup", str(backup)
    )
    assert code == 0, err
    assert (backup / "evil.jsonl").is_symlink()
    assert not (store / "evil.jsonl").exists()
    assert outside.read_text() == "not ours\n"
    assert cli(capsys, "check", "--db", f"jsonl:{store}")[0] == 0


def test_check_of_a_healthy_store_reports_a_torn_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    build(f"jsonl:{store}", {"s1": 3})
    with (store / "s1.jsonl").open("ab") as f:
        f.write(b'{"id": "half')
    code, out, _ = cli(capsys, "check", "--db", f"jsonl:{store}")
    assert code == 0
    assert "s1: 3 entries; 12 uncommitted bytes" in " ".join(out.split())


# -- SQLite -----------------------------------------------------------------------------------


def _pages(path: Path) -> tuple[int, list[int], list[int]]:
    """Page size, the pages of the session index, and the entries table's leaf pages."""
    conn = sqlite3.connect(path)
    try:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        rows = conn.execute("SELECT name, pageno, pagetype FROM dbstat").fetchall()
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table")
    finally:
        conn.close()
    index = [p for name, p, _ in rows if name == "entries_session_seq"]
    leaves = sorted(p for name, p, kind in rows if name == "entries" and kind == "leaf")
    return size, index, leaves


def _zero(path: Path, page_size: int, pages: list[int]) -> None:
    with path.open("r+b") as f:
        for number in pages:
            f.seek((number - 1) * page_size)
            f.write(b"\0" * page_size)


def test_sqlite_check_and_repair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "store.db"
    build(f"sqlite:{db}", {"s1": 300, "s2": 300, "s3": 300})
    assert cli(capsys, "check", "--db", str(db))[0] == 0
    good_url = f"sqlite:{tmp_path / 'original.db'}"
    (tmp_path / "original.db").write_bytes(db.read_bytes())
    original = {sid: entry_ids(good_url, sid) for sid in ("s1", "s2", "s3")}
    page_size, index, leaves = _pages(db)
    # Every session's index pages, and one table page in the middle of s2's rows.
    _zero(db, page_size, [*index, leaves[len(leaves) // 2]])
    damaged = db.read_bytes()
    code, _, err = cli(capsys, "check", "--db", str(db))
    assert code == 1 and "quick_check" in err
    assert db.read_bytes() == damaged

    target = tmp_path / "repaired.db"
    backup = tmp_path / "backup.db"
    code, out, err = cli(
        capsys,
        "check",
        "--db",
        str(db),
        "--repair",
        "--json",
        "--output",
        str(target),
        "--backup",
        str(backup),
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["repaired"] == str(target) and backup.read_bytes() == damaged
    assert db.read_bytes() == damaged  # the damaged file is left for the user
    assert not [p for p in tmp_path.iterdir() if ".reading" in p.name]
    assert cli(capsys, "check", "--db", str(target))[0] == 0
    copied = {s["session"]: s for s in report["sessions"]}
    assert sorted(copied) == ["s1", "s2", "s3"]
    kept = {sid: entry_ids(f"sqlite:{target}", sid) for sid in original}
    for sid, ids in original.items():
        assert kept[sid] == ids[: len(kept[sid])]  # one chain each: a prefix survives
        assert copied[sid]["copied"] == len(kept[sid])
        if len(kept[sid]) < len(ids):
            assert "unreadable stretch" in copied[sid]["problem"]
    # The index was lost everywhere, yet a session outside the zeroed table page is whole
    # (in a chain, everything after a lost entry goes with it: its parent is gone).
    assert any(k == original[sid] for sid, k in kept.items())
    assert [s for s in copied.values() if s["problem"] is not None]


def test_sqlite_check_on_a_file_that_is_not_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "junk.db"
    db.write_bytes(b"hello" * 1000)
    code, _, err = cli(capsys, "check", "--db", str(db))
    assert code == 1 and "quick_check" in err
    assert db.read_bytes() == b"hello" * 1000
    assert sorted(os.listdir(tmp_path)) == ["junk.db"]


def test_read_commands_on_one_session_ignore_damage_elsewhere(
    damaged_jsonl: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"jsonl:{damaged_jsonl}"
    code, out, err = cli(capsys, "status", "--session", "s1", "--db", url, "--json")
    assert code == 0, err
    code, out, err = cli(capsys, "page", "--session", "s1", "--cursor", "s1-0", "--db", url)
    assert code == 0, err
    assert "s1-1" in out
    code, _, err = cli(capsys, "status", "--session", "s3", "--db", url)
    assert code == 1 and "s3.jsonl line 31" in err
