"""``support.sql_work`` counts what it claims to: controls whose answer is known."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.sql_work import statements

from prism_om.stores import open_store
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.generate import make_message


def test_a_plain_connection_running_three_statements_counts_three(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with statements(monkeypatch) as traced:
        conn = sqlite3.connect(tmp_path / "plain.db", isolation_level=None)
    try:
        with traced.counting() as run:
            conn.execute("CREATE TABLE t (x)")
            conn.execute("BEGIN")
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("COMMIT")
            assert conn.execute("SELECT x FROM t").fetchall() == [(1,)]
        assert run.statements == [
            "CREATE TABLE t (x)",
            "INSERT INTO t VALUES (1)",
            "SELECT x FROM t",
        ]
        assert run.count == 3
        assert len(run.everything) == 5  # BEGIN and COMMIT are housekeeping
        assert traced.connections == 1
        with traced.counting() as nothing:
            pass
        assert nothing.count == 0 and nothing.work == 0
    finally:
        conn.close()


def test_work_grows_with_the_rows_a_statement_visits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with statements(monkeypatch) as traced:
        conn = sqlite3.connect(tmp_path / "rows.db", isolation_level=None)
    try:
        conn.execute("CREATE TABLE t (x INTEGER PRIMARY KEY, y)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", ((n, n) for n in range(20000)))
        with traced.counting() as point:
            conn.execute("SELECT y FROM t WHERE x = 5").fetchall()
        with traced.counting() as scan:
            conn.execute("SELECT count(*) FROM t WHERE y = 5").fetchall()
        assert point.count == scan.count == 1
        assert point.work <= 1 < 100 < scan.work
        assert point.rows == scan.rows == 1
        with traced.counting() as fifty:
            assert len(list(conn.execute("SELECT y FROM t WHERE x < 50"))) == 50
            assert conn.execute("SELECT y FROM t WHERE x = 7").fetchone() == (7,)
        assert fifty.rows == 51 and fifty.count == 2
    finally:
        conn.close()


async def test_a_get_on_a_store_is_one_statement(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with statements(monkeypatch) as traced:
        store = await SqliteStore.open(tmp_path / "s.db")
    async with store:
        entry = make_message("s", "m0", None, "user", "hello", 0)
        await store.append(entry)
        with traced.counting() as run:
            assert await store.get("m0") == entry
        assert run.count == 1, run.everything
        assert run.rows == 1
        assert run.statements[0].startswith("SELECT") and "m0" in run.statements[0]
        with traced.counting() as missing:
            assert await store.get("nope") is None
        assert missing.count == 1


async def test_a_get_on_postgres_is_one_statement(
    monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    with statements(monkeypatch) as traced:
        store = await open_store(postgres_url)
    async with store:
        entries = [
            make_message("s", f"m{n}", f"m{n - 1}" if n else None, "user", "x", n) for n in range(3)
        ]
        with traced.counting() as append:
            await store.append_many(entries)
        assert append.count >= 1
        with traced.counting() as run:
            assert await store.get("m1") == entries[1]
        assert run.count == 1, run.everything
        assert run.rows == 1
        assert "entries" in run.statements[0]


def test_armed_failures_replace_the_next_matching_statements(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with statements(monkeypatch) as traced:
        conn = sqlite3.connect(tmp_path / "fail.db", isolation_level=None)
        probe = sqlite3.connect(tmp_path / "fail.db")
        probe.close()
    assert traced.connections == 2 and traced.open_connections == 1
    try:
        traced.fail_next(sqlite3.OperationalError("database is locked"), matching="FROM t")
        conn.execute("CREATE TABLE t (x)")  # does not match: runs
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            conn.execute("SELECT x FROM t")
        assert traced.failures_left == 0
        assert conn.execute("SELECT x FROM t").fetchall() == []
    finally:
        conn.close()
        conn.close()  # a second close is not counted twice
    assert traced.open_connections == 0
