"""``docs/eval.md`` cannot drift from the code: its commands and Python run, its first
printed line is what the command prints first, and every JSON field it lists exists."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import ok, run_cli

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "eval.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(python|console|text)\n(.*?)```", PAGE, flags=re.S)
COMMANDS = [
    line
    for lang, body in BLOCKS
    if lang == "console"
    for line in body.splitlines()
    if line.startswith("prism-om ")
]
FIELDS = re.findall(r"^\| `([A-Za-z0-9.\[\]]+)` \|", PAGE.split("## The JSON", 1)[1], flags=re.M)


def test_the_page_has_commands_python_and_fields() -> None:
    assert len(COMMANDS) >= 4
    assert any(lang == "python" for lang, _ in BLOCKS)
    assert len(FIELDS) >= 30


@pytest.mark.parametrize("line", COMMANDS)
def test_every_command_runs(line: str) -> None:
    ok(run_cli(*shlex.split(line)[1:], cwd=ROOT))


def test_the_first_line_printed_is_the_pages() -> None:
    expected = next(body for lang, body in BLOCKS if lang == "text").strip()
    printed = ok(run_cli(*shlex.split(COMMANDS[0])[1:], cwd=ROOT))
    assert printed.splitlines()[0] == expected


def test_the_python_example_runs() -> None:
    for lang, body in BLOCKS:
        if lang == "python":
            done = subprocess.run(
                [sys.executable, "-c", body],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr


def _present(data: Any, path: list[str]) -> bool:
    if not path:
        return True
    key, rest = path[0], path[1:]
    if key.endswith("[]"):
        items = data.get(key[:-2]) if isinstance(data, dict) else None
        return bool(items) and all(_present(item, rest) for item in items)
    return isinstance(data, dict) and key in data and _present(data[key], rest)


def test_every_listed_json_field_is_in_the_output(tmp_path: Path) -> None:
    done = run_cli(
        "eval", str(ROOT / "tests/data/eval/locomo_published_shape.json"), "--json", cwd=tmp_path
    )
    summary = json.loads(ok(done))
    missing = [f for f in FIELDS if not _present(summary, f.split("."))]
    assert missing == []
