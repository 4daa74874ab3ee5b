"""``prism-om check`` on a SQLite file that SQLite finds sound but whose rows or derived
memory tables are wrong: since schema version 4 reads trust the store's own rows, so the
check is where such damage must show, and ``--repair`` copies the sessions without it."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from support.store_builders import build, cli

from prism_om.core.ledger import fold_ledger
from prism_om.core.ledger_views import live_ledger
from prism_om.stores import open_store

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v3.db"


def edit(db: Path, sql: str, *params: object) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql, params)
    conn.close()


def migrated(tmp_path: Path) -> Path:
    """The committed version 3 store (observations, drops, reflections, forks), at v4."""
    db = tmp_path / "memory.db"
    shutil.copyfile(FIXTURE, db)

    async def run() -> None:
        async with await open_store(f"sqlite:{db}") as store:
            await store.sessions()

    asyncio.run(run())
    return db


def test_a_sound_store_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = migrated(tmp_path)
    code, out, _ = cli(capsys, "check", "--db", str(db))
    assert code == 0 and "every row" in out


def test_a_row_that_no_longer_validates_is_reported_and_left_out_by_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.db"
    build(f"sqlite:{db}", {"s1": 30, "s2": 30})
    ids = [
        row[0]
        for row in sqlite3.connect(db).execute(
            "SELECT id FROM entries WHERE session_id = 's2' ORDER BY seq"
        )
    ]
    edit(db, "UPDATE entries SET timestamp = 'garbage' WHERE id = ?", ids[20])
    code, out, err = cli(capsys, "check", "--db", str(db))
    assert code == 1 and f"DAMAGED  entry {ids[20]!r} of session 's2'" in out
    assert "row and memory check" in err
    code, out, err = cli(capsys, "check", "--db", str(db), "--json")
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    assert any(ids[20] in p and "'s2'" in p for p in report["problems"])

    target = tmp_path / "repaired.db"
    code, out, err = cli(
        capsys, "check", "--db", str(db), "--repair", "--json", "--output", str(target)
    )
    assert code == 0, err
    assert cli(capsys, "check", "--db", str(target))[0] == 0

    async def kept(sid: str) -> list[str]:
        async with await open_store(f"sqlite:{target}") as store:
            return [e.id for e in await store.list(sid)]

    # A chain: the bad entry goes with everything after it; s1 is whole.
    assert asyncio.run(kept("s2")) == ids[:20]
    assert len(asyncio.run(kept("s1"))) == 30


def test_a_parent_that_is_not_in_the_session_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.db"
    build(f"sqlite:{db}", {"s1": 10, "s2": 10})
    conn = sqlite3.connect(db)
    other = conn.execute("SELECT id FROM entries WHERE session_id = 's1' LIMIT 1").fetchone()[0]
    victim = conn.execute(
        "SELECT id FROM entries WHERE session_id = 's2' ORDER BY seq LIMIT 1 OFFSET 5"
    ).fetchone()[0]
    conn.close()
    edit(db, "UPDATE entries SET parent_id = ? WHERE id = ?", other, victim)
    code, out, _ = cli(capsys, "check", "--db", str(db))
    assert code == 1 and victim in out and "is not an earlier entry of its session" in out


def test_a_live_pool_that_disagrees_with_the_entries_is_reported_and_rebuilt_by_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = migrated(tmp_path)
    conn = sqlite3.connect(db)
    pooled = conn.execute("SELECT count(*) FROM om_live").fetchone()[0]
    conn.close()
    assert pooled > 0
    edit(db, "DELETE FROM om_live WHERE rowid = (SELECT min(rowid) FROM om_live)")
    code, out, _ = cli(capsys, "check", "--db", str(db))
    assert code == 1 and "live memory (om_live) differs from the fold" in out

    target = tmp_path / "repaired.db"
    code, _, err = cli(capsys, "check", "--db", str(db), "--repair", "--output", str(target))
    assert code == 0, err
    assert cli(capsys, "check", "--db", str(target))[0] == 0

    async def every_leaf_equals_the_fold() -> int:
        leaves = 0
        async with await open_store(f"sqlite:{target}") as store:
            for sid in await store.sessions():
                for leaf in await store.leaves(sid):
                    folded = fold_ledger(await store.entries(sid, leaf))
                    assert await store.live_ledger(sid, leaf) == live_ledger(folded)
                    leaves += 1
        return leaves

    assert asyncio.run(every_leaf_equals_the_fold()) > 2


def test_an_older_file_is_checked_as_it_is_and_left_unmigrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A read-only open refuses an older file; the check compares its memory on a
    # migrated copy instead, and the file keeps its version and bytes.
    db = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, db)
    before = db.read_bytes()
    code, out, err = cli(capsys, "check", "--db", str(db))
    assert code == 0 and "every row" in out, err
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.db"]
    # Damage the copy's memory could not hide: a live pool is rebuilt at migration, so
    # a fold row edited away shows as the stored memory differing from the fold.
    edit(db, "DELETE FROM om_observations WHERE rowid = (SELECT min(rowid) FROM om_observations)")
    code, out, _ = cli(capsys, "check", "--db", str(db))
    assert code == 1 and "differs from the fold" in out
    assert "migrated.db" not in out  # problems name the file, not the scratch copy
