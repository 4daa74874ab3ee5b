"""The shared work-scope example runs end to end as a script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "shared_work_scope.py"


def test_shared_work_scope_example_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "[owner-session] opened build-42 and granted participant" in lines
    assert "  access build-42 for participant: granted (granted)" in lines
    assert any(line.startswith("  shared from owner-session: [") for line in lines)
    assert "  access build-42 for participant: DENIED (revoked)" in lines
    assert lines[-1] == "done: the revoke landed on the next resolve"
    assert done.stderr == ""
