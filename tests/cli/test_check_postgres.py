"""``prism-om check`` on PostgreSQL: the rows read back and the fold tables checked."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from support.store_builders import cli

from prism_om.stores.postgres import split_postgres_url


def test_check_reads_a_postgres_store_and_finds_a_damaged_fold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], postgres_url: str
) -> None:
    db = str(tmp_path / "demo.db")
    assert cli(capsys, "demo", "--db", db)[0] == 0
    assert cli(capsys, "copy", "--from", f"sqlite:{db}", "--to", postgres_url)[0] == 0

    code, out, err = cli(capsys, "check", "--db", postgres_url, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] is True and report["sessions"] >= 1 and report["problems"] == []

    # A fold row edited behind the store's back: the memory no longer matches its entries.
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DELETE FROM {}.om_drops").format(sql.Identifier(schema)))
    code, out, err = cli(capsys, "check", "--db", postgres_url)
    assert code == 1
    assert "DAMAGED" in out and "differs from the fold of its entries" in out
    assert "prism-om copy --from" in err

    # --repair is for files; on a server it says what to run instead, and writes nothing.
    code, _, err = cli(capsys, "check", "--db", postgres_url, "--repair")
    assert code == 2 and "prism-om copy --from" in err and "pg_dump" in err
