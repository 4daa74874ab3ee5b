"""``python -m bench --adapters postgres``: our adapter beside the psycopg floor, checked."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench import __main__ as runner
from bench.model import FLOOR, PG_FLOOR, PG_REFERENCE
from bench.report import check_targets, tables


def test_bench_runs_postgres_beside_its_floor(
    tmp_path: Path, postgres_base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server the tests started stands in for the bench's own throwaway cluster.
    monkeypatch.setenv("PRISM_TEST_POSTGRES_URL", postgres_base_url)
    monkeypatch.setattr(runner, "SINGLE_APPENDS", 20)
    monkeypatch.setattr(runner, "BATCHES", 2)
    args = runner.parse_args(
        ["--sizes", "300", "--adapters", "postgres", "--peers", "none", "--repeat", "1"]
    )
    results, _, _ = asyncio.run(runner.run(args, str(tmp_path)))
    found = {(r.workload, r.system) for r in results}
    for workload in ("recall", "page20", "append_batch", "append_single", "branch"):
        assert (workload, "postgres") in found
        assert (workload, PG_FLOOR) in found
    assert ("rtt", PG_REFERENCE) in found
    assert not any(system in {"sqlite", FLOOR} for _, system in found)
    names = [t.name for t in check_targets(results, [300])]
    assert any(n.startswith("PostgreSQL recall within 2x") for n in names)
    assert any(n.startswith("PostgreSQL append_many within 2x") for n in names)
    assert "| prism-om postgres |" in tables(results, [300])
