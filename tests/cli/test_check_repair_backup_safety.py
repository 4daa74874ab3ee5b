"""``prism-om check --repair``: a backup never replaces anything already on disk.

An explicit ``--backup`` that exists (a file, or a directory holding a file the backup
would write) is a usage error (exit 2) naming it, and nothing is written; default backup
names stay unique even for two repairs within one second. JSONL and SQLite both.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from support.store_builders import build, cli

from prism_om.cli import check as check_module
from prism_om.cli.app import main
from prism_om.errors import InvalidInputError
from prism_om.stores.jsonl import JsonlStore

STAMP = "20261130T101010"


def _new_files(root: Path, before: set[Path]) -> set[str]:
    """Files that appeared, but the shared-memory files SQLite's reader adds beside a store."""
    return {p.name for p in set(root.iterdir()) - before if not p.name.endswith(("-wal", "-shm"))}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture
def fixed_stamp(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every repair in the test happens "within the same second"."""
    monkeypatch.setattr(check_module, "_stamp", lambda: STAMP)


# -- JSONL ----------------------------------------------------------------------------------


def _damage_jsonl(store: Path, sid: str = "s2") -> None:
    data = store / f"{sid}.jsonl"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])


@pytest.fixture
def jsonl_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    build(f"jsonl:{store}", {"s1": 10, "s2": 30})
    _damage_jsonl(store)
    return store


def test_jsonl_backup_directory_holding_a_backup_file_is_refused(
    tmp_path: Path, jsonl_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backup = tmp_path / "dqbak"
    backup.mkdir()
    (backup / "s2.jsonl").write_bytes(b"precious earlier backup\n")
    before_store, before_backup = _snapshot(jsonl_store), _snapshot(backup)
    code, _, err = cli(
        capsys, "check", "--db", f"jsonl:{jsonl_store}", "--repair", "--backup", str(backup)
    )
    assert code == 2, err
    assert str(backup) in err and "s2.jsonl" in err
    assert _snapshot(jsonl_store) == before_store
    assert _snapshot(backup) == before_backup


def test_jsonl_backup_that_is_a_file_is_refused(
    tmp_path: Path, jsonl_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backup = tmp_path / "precious.txt"
    backup.write_bytes(b"keep me")
    before = _snapshot(jsonl_store)
    code, _, err = cli(
        capsys, "check", "--db", f"jsonl:{jsonl_store}", "--repair", "--backup", str(backup)
    )
    assert code == 2 and str(backup) in err
    assert backup.read_bytes() == b"keep me" and _snapshot(jsonl_store) == before


def test_jsonl_repairing_twice_with_one_backup_keeps_the_first_backup(
    tmp_path: Path, jsonl_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backup = tmp_path / "bak"
    url = f"jsonl:{jsonl_store}"
    assert cli(capsys, "check", "--db", url, "--repair", "--backup", str(backup))[0] == 0
    first = _snapshot(backup)
    assert "s2.jsonl" in first
    build(url, {"s3": 5})
    _damage_jsonl(jsonl_store)  # the same session damaged again
    before = _snapshot(jsonl_store)
    code, _, err = cli(capsys, "check", "--db", url, "--repair", "--backup", str(backup))
    assert code == 2 and str(backup) in err
    assert _snapshot(backup) == first and _snapshot(jsonl_store) == before


def test_jsonl_backup_directory_with_unrelated_files_is_used(
    tmp_path: Path, jsonl_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backup = tmp_path / "bak"
    backup.mkdir()
    (backup / "notes.txt").write_bytes(b"mine")
    code, _, err = cli(
        capsys, "check", "--db", f"jsonl:{jsonl_store}", "--repair", "--backup", str(backup)
    )
    assert code == 0, err
    assert (backup / "notes.txt").read_bytes() == b"mine" and (backup / "s2.jsonl").exists()


def test_jsonl_store_repair_refuses_an_occupied_backup(tmp_path: Path, jsonl_store: Path) -> None:
    backup = tmp_path / "bak"
    backup.mkdir()
    (backup / "s2.leaf.json").write_bytes(b"{}")
    before = _snapshot(jsonl_store)

    async def run() -> None:
        async with await JsonlStore.open(str(jsonl_store), create=False) as store:
            await store.repair(backup)

    with pytest.raises(InvalidInputError) as caught:
        asyncio.run(run())
    assert str(backup) in str(caught.value) and caught.value.session_id == "s2"
    assert _snapshot(jsonl_store) == before


def test_jsonl_default_backup_names_are_unique_within_one_second(
    tmp_path: Path, jsonl_store: Path, capsys: pytest.CaptureFixture[str], fixed_stamp: None
) -> None:
    url = f"jsonl:{jsonl_store}"
    code, out, err = cli(capsys, "check", "--db", url, "--repair", "--json")
    assert code == 0, err
    first = Path(json.loads(out)["backup"])
    kept = _snapshot(first)
    _damage_jsonl(jsonl_store)
    code, out, err = cli(capsys, "check", "--db", url, "--repair", "--json")
    assert code == 0, err
    second = Path(json.loads(out)["backup"])
    assert first.name == f"store.backup-{STAMP}" and second.name == f"store.backup-{STAMP}-1"
    assert _snapshot(first) == kept and (second / "s2.jsonl").exists()


# -- SQLite ---------------------------------------------------------------------------------


def _damage_sqlite(db: Path) -> None:
    """Zero the session index pages: quick_check fails, the table is still readable."""
    conn = sqlite3.connect(db)
    try:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        rows = conn.execute("SELECT name, pageno FROM dbstat").fetchall()
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table")
    finally:
        conn.close()
    with db.open("r+b") as f:
        for name, page in rows:
            if name == "entries_session_seq":
                f.seek((page - 1) * size)
                f.write(b"\0" * size)


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Path:
    db = tmp_path / "zz.db"
    build(f"sqlite:{db}", {"s1": 40, "s2": 40})
    _damage_sqlite(db)
    return db


def test_sqlite_existing_backup_file_is_refused_and_nothing_written(
    tmp_path: Path, sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    precious = tmp_path / "precious.db"
    build(f"sqlite:{precious}", {"keep": 3})
    kept, before = precious.read_bytes(), set(tmp_path.iterdir())
    code, _, err = cli(
        capsys,
        "check",
        "--db",
        str(sqlite_db),
        "--repair",
        "--output",
        str(tmp_path / "new1.db"),
        "--backup",
        str(precious),
    )
    assert code == 2 and str(precious) in err
    assert precious.read_bytes() == kept
    assert _new_files(tmp_path, before) == set()  # no output, no scratch copy


def test_sqlite_backup_wal_beside_the_name_is_refused(
    tmp_path: Path, sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wal = tmp_path / "bak.db-wal"
    wal.write_bytes(b"someone's wal")
    code, _, err = cli(
        capsys, "check", "--db", str(sqlite_db), "--repair", "--backup", str(tmp_path / "bak.db")
    )
    assert code == 2 and str(wal) in err and wal.read_bytes() == b"someone's wal"


def test_sqlite_backup_and_output_naming_one_file_is_refused(
    tmp_path: Path, sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = str(tmp_path / "one.db")
    before = set(tmp_path.iterdir())
    code, _, err = cli(
        capsys, "check", "--db", str(sqlite_db), "--repair", "--output", same, "--backup", same
    )
    assert code == 2 and same in err and _new_files(tmp_path, before) == set()


def test_sqlite_default_names_are_unique_within_one_second(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str], fixed_stamp: None
) -> None:
    damaged = sqlite_db.read_bytes()
    reports = []
    for _ in range(2):
        code, out, err = cli(capsys, "check", "--db", str(sqlite_db), "--repair", "--json")
        assert code == 0, err
        reports.append(json.loads(out))
    first, second = reports
    assert first["backup"] == f"{sqlite_db}.backup-{STAMP}"
    assert second["backup"] == f"{sqlite_db}.backup-{STAMP}-1"
    assert first["repaired"] == f"{sqlite_db}.repaired-{STAMP}"
    assert second["repaired"] == f"{sqlite_db}.repaired-{STAMP}-1"
    assert Path(first["backup"]).read_bytes() == damaged
    assert Path(second["backup"]).read_bytes() == damaged
    assert main(["check", "--db", first["repaired"]]) == 0
