"""``bench.search``: the index-off baseline writes no index row and changes nothing else,
and the script prints one row of figures per size."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench.search import Corpus, index_writes_off, load, main, session_entries


async def test_the_baseline_differs_only_by_the_index(tmp_path: Path) -> None:
    corpus = Corpus(3)
    entries = session_entries(260, corpus)
    extra = [
        e.model_copy(update={"id": f"x{n}", "parent_id": None})
        for n, e in enumerate(session_entries(11, corpus)[1:])
        if e.kind == "message"
    ]
    await load(tmp_path / "indexed.db", entries, extra)
    with index_writes_off():
        await load(tmp_path / "base.db", entries, extra, index=False)

    def rows(name: str, table: str) -> int:
        conn = sqlite3.connect(tmp_path / name)
        (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        conn.close()
        return int(count)

    assert rows("base.db", "search_blocks") == 0 < rows("indexed.db", "search_blocks")
    for table in ("entries", "om_observations", "om_live"):
        assert rows("base.db", table) == rows("indexed.db", table) > 0


def test_the_script_prints_a_row_per_size(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--sizes", "300", "--queries", "3"])
    out = capsys.readouterr().out
    assert "search p50/p95" in out and "      300 " in out and "bytes" in out
