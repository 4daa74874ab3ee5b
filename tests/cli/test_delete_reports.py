"""What ``prism-om delete`` says: damaged sessions erased, backups named, WAL frames a
reader kept in place reported rather than claimed gone, what a PostgreSQL server keeps
(and the VACUUM FULL that rewrites it), a missing tombstone session."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prism_om.session import Session
from prism_om.stores import open_store
from tests.support.store_builders import cli

SECRET = "ERASE-ME-k4v8"


def _write(url: str, sid: str, *texts: str) -> None:
    async def run() -> None:
        async with await open_store(url) as store:
            for text in texts:
                await Session(store, sid).append_message("user", text)

    asyncio.run(run())


def _damage(directory: Path, sid: str) -> None:
    data = directory / f"{sid}.jsonl"
    data.write_bytes(data.read_bytes()[:-15])  # shorter than its sidecar commits


def test_a_damaged_jsonl_session_is_deleted_without_a_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"jsonl:{tmp_path / 'store'}"
    _write(url, "bad", SECRET, "two")
    _write(url, "good", "kept")
    _damage(tmp_path / "store", "bad")
    code, out, err = cli(capsys, "delete", "bad", "--db", url, "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["deletedEntries"] == 2
    assert json.loads(out)["backups"] == []
    assert sorted(p.name for p in (tmp_path / "store").iterdir() if "bad" in p.name) == []
    code, out, err = cli(capsys, "check", "--db", url)
    assert code == 0, out + err


def test_delete_names_the_backups_check_repair_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    url = f"jsonl:{store}"
    _write(url, "bad", SECRET, "two", "three")
    _write(url, "good", "kept")
    _damage(store, "bad")
    code, out, err = cli(capsys, "check", "--db", url, "--repair")
    backups = [p for p in tmp_path.iterdir() if p.name.startswith("store.backup-")]
    assert code != 0 or backups, out + err
    assert len(backups) == 1 and SECRET.encode() in (backups[0] / "bad.jsonl").read_bytes()
    code, out, err = cli(capsys, "delete", "bad", "--db", url, "--yes")
    assert code == 0, err
    assert f"may still hold its text: {backups[0] / 'bad.jsonl'}" in out.replace("\n", " ")
    code, out, err = cli(capsys, "delete", "good", "--db", url, "--yes")
    assert code == 0, err
    assert "may still hold" not in out  # the backup holds no copy of this one


def test_sqlite_delete_says_when_a_reader_kept_the_text_in_the_wal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.db"
    url = f"sqlite:{db}"
    _write(url, "gone", *(f"{SECRET} {n}" for n in range(20)))
    _write(url, "kept", "kept")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA busy_timeout = 0")
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM entries").fetchone()  # a snapshot held open
    try:
        code, out, err = cli(capsys, "delete", "gone", "--db", url, "--yes", "--json")
        assert code == 0, err
        pending = json.loads(out)["walFramesPending"]
        assert pending > 0
        assert SECRET.encode() in db.read_bytes()  # so the report above is not a false alarm
    finally:
        holder.execute("COMMIT")
        holder.close()
    _write(url, "kept", "again")  # the last close checkpoints
    assert SECRET.encode() not in db.read_bytes()
    code, out, err = cli(capsys, "delete", "kept", "--db", url, "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["walFramesPending"] == 0


def test_a_missing_tombstone_session_is_said_to_be_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:{tmp_path / 'store.db'}"
    _write(url, "s1", "hello")
    code, _, err = cli(capsys, "delete", "tombstones.nosuch", "--db", url, "--yes")
    assert code == 2
    assert "no session 'tombstones.nosuch'" in err and "tombstones;" not in err


def _relation_bytes(conn: Any, table: str) -> bytes:
    """The table's file as the server holds it on disk (after a CHECKPOINT has flushed it)."""
    row = conn.execute(
        "SELECT pg_read_binary_file(pg_relation_filepath(%s::regclass))", (table,)
    ).fetchone()
    return bytes(row[0])


def test_postgres_delete_says_what_the_server_keeps_and_how_to_rewrite_it(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    from prism_om.stores.postgres import split_postgres_url

    conninfo, schema, _ = split_postgres_url(postgres_url)
    _write(postgres_url, "gone", *(f"{SECRET} {n}" for n in range(20)))
    _write(postgres_url, "kept", "kept", "twice")
    code, out, err = cli(capsys, "delete", "gone", "--db", postgres_url, "--yes", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["deletedEntries"] == 20 and report["serverKeepsText"] is True
    statement = report["vacuumFullSql"]
    assert statement.startswith(f'VACUUM FULL "{schema}"."om_observation_sources", ')
    assert f'"{schema}"."entries"' in statement and f'"{schema}"."sessions"' in statement
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"SET search_path = {schema}")
        conn.execute("CHECKPOINT")
        # What the report says is so: the deleted rows' bytes are still in the file.
        assert SECRET.encode() in _relation_bytes(conn, "entries")
        conn.execute(statement)  # the statement as reported runs outside a transaction
        conn.execute("CHECKPOINT")
        assert SECRET.encode() not in _relation_bytes(conn, "entries")
        assert b"twice" in _relation_bytes(conn, "entries")
    code, out, err = cli(capsys, "delete", "kept", "--db", postgres_url, "--yes")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("deleted session kept (2 entries) from postgresql://")
    text = " ".join(lines[1:-1])
    assert "PostgreSQL still holds the deleted rows' bytes" in text
    assert "until VACUUM FULL rewrites them" in text and "a plain VACUUM" in text
    assert "WAL" in text and "replica or backup" in text
    assert lines[-1] == statement + ";"  # one line, to copy whole


def test_sqlite_and_jsonl_delete_report_no_server_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for url in (f"sqlite:{tmp_path / 'store.db'}", f"jsonl:{tmp_path / 'store'}"):
        _write(url, "gone", SECRET, "two")
        _write(url, "kept", "kept")
        code, out, err = cli(capsys, "delete", "gone", "--db", url, "--yes", "--json")
        assert code == 0, err
        report = json.loads(out)
        assert report["deletedEntries"] == 2 and report["walFramesPending"] == 0
        assert report["serverKeepsText"] is False and report["vacuumFullSql"] is None
        code, out, err = cli(capsys, "delete", "kept", "--db", url, "--yes")
        assert code == 0, err
        assert out.splitlines() == [f"deleted session kept (1 entries) from {url}"]
        files = [p for p in tmp_path.rglob("*") if p.is_file()]
        assert not any(SECRET.encode() in p.read_bytes() for p in files), url
