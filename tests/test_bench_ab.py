"""``python -m bench.ab`` runs a workload of this tree beside a git revision and prints both
arms; here the revision is HEAD and the figures are not looked at, only that each arm ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ab(*args: str, env: dict[str, str] | None = None) -> str:
    small = ("--rev", "HEAD", "--sizes", "300", "--rounds", "2")
    done = subprocess.run(
        [sys.executable, "-m", "bench.ab", *small, *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _arms(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines() if line.startswith("  ")]


@pytest.mark.parametrize("workload", ["page", "recall"])
def test_a_read_runs_beside_the_round_trip(workload: str) -> None:
    out = _ab("--workload", workload)
    assert out.startswith(f"sqlite {workload}, 300 entries, 2 rounds (old = HEAD)")
    assert _arms(out) == ["rtt", "new", "old", "new/old", "new/old"]
    assert out.count("x rtt") == 2


def test_appends_run_on_a_store_per_version() -> None:
    out = _ab("--workload", "append")
    assert _arms(out) == ["new", "old", "new/old", "new/old"]


def test_postgres_reads_run_beside_the_psycopg_round_trip(postgres_base_url: str) -> None:
    server = {"PRISM_TEST_POSTGRES_URL": postgres_base_url}
    out = _ab("--workload", "recall", "--adapter", "postgres", env=server)
    assert _arms(out) == ["rtt", "new", "old", "new/old", "new/old"]
