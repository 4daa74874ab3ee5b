"""The demo ends with the commands to try next; each one it names must work as printed
(the inspect page is a server, so its line is checked to parse, not served)."""

from __future__ import annotations

import shlex
from pathlib import Path

from support.cli import ok, run_cli


def test_every_next_command_the_demo_prints_works(tmp_path: Path) -> None:
    out = ok(run_cli("demo", cwd=tmp_path))
    tail = out.split("Next:", 1)[1]
    commands = [shlex.split(line.split("   (", 1)[0]) for line in tail.splitlines() if line.strip()]
    assert [c[1] for c in commands] == ["sessions", "status", "view", "inspect"]
    assert "pip install 'prism-om[inspect]'" in tail
    for command in commands:
        assert command[0] == "prism-om"
        if command[1] == "inspect":
            assert ok(run_cli(*command[1:], "--help", cwd=tmp_path))
            assert command[command.index("--db") + 1] == "prism-om-demo.db"
        else:
            assert ok(run_cli(*command[1:], cwd=tmp_path))
