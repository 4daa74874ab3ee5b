"""The ``prism-om`` command, run as a subprocess against temporary stores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prism_om.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_creates_a_sqlite_store_and_prints_the_branch(tmp_path: Path) -> None:
    done = run_cli("demo", "--db", "demo.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "demo.db").exists()
    assert "branch, root first" in done.stdout
    assert "migration 0042" in done.stdout
    listed = run_cli("sessions", "--db", "demo.db", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert rows[0]["session"] == "demo" and rows[0]["entries"] >= 4


def test_missing_session_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run_cli("demo", "--db", "demo.db", cwd=tmp_path)
    done = run_cli("branch", "--db", "demo.db", "nope", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("prism-om: error:")
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_bad_store_url_is_a_clean_error(tmp_path: Path) -> None:
    done = run_cli("sessions", "--db", "ftp:nowhere", cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown store URL" in done.stderr
