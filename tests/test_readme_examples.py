"""Every example of the README runs, so the README cannot drift from the code.

Python blocks run in a subprocess each, and console blocks run line by line (each line
is a ``prism-om`` command, run as ``python -m prism_om.cli``), all in one temporary
directory, in README order. The two set-up commands at the top are ``tests/test_readme.py``'s.
Every date an example prints must be right (``support.dates.wrong_dates``): the memory
example printed ``Atlas 2.4 ships Tuesday (8 December 2026) 2026-03-17`` on the code before
issue 31, the weekday beside a written date resolved again against the day it ran.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.dates import wrong_dates

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(python|console|sh)\n(.*?)```", README, flags=re.S)
# The first two ```sh blocks are the install-and-run commands (tests/test_readme.py).
EXAMPLES = [(lang, body) for lang, body in BLOCKS if lang != "sh"]


def _chat_file(where: Path) -> None:
    """The ``chat.jsonl`` the README's ``prism-om import`` example reads."""
    lines = [
        {"role": "user", "content": "Atlas 2.4 ships on Tuesday 2026-03-17."},
        {"role": "assistant", "content": "Noted: Atlas 2.4 ships on 2026-03-17."},
        {"role": "user", "content": "Leo runs migration 0042 on Monday 2026-03-16 at 22:00."},
        {"role": "assistant", "content": "Migration 0042 is scheduled for 2026-03-16 22:00."},
    ]
    (where / "chat.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_the_readme_has_examples() -> None:
    assert any(lang == "python" for lang, _ in EXAMPLES)
    assert any(lang == "console" for lang, _ in EXAMPLES)


def test_every_readme_example_runs(tmp_path: Path) -> None:
    _chat_file(tmp_path)
    env = {**os.environ, "COLUMNS": "120"}
    for number, (lang, body) in enumerate(EXAMPLES, 1):
        if lang == "python":
            script = tmp_path / f"example_{number}.py"
            script.write_text(body, encoding="utf-8")
            done = subprocess.run(
                [sys.executable, str(script)],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
            )
            assert done.returncode == 0, f"README python block {number}:\n{done.stderr}"
            # What the example prints is what a reader copies: its dates must be right.
            assert wrong_dates(done.stdout) == [], f"README python block {number}"
            continue
        for line in body.splitlines():
            if not line.startswith("prism-om"):
                continue
            done = subprocess.run(
                [sys.executable, "-m", "prism_om.cli", *shlex.split(line)[1:]],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
            )
            assert done.returncode == 0, f"README command {line!r}:\n{done.stderr}"
            assert wrong_dates(done.stdout) == [], f"README command {line!r}"


@pytest.mark.parametrize("name", ["OfflineMemoryProvider", "create_observational_memory"])
def test_readme_names_exist(name: str) -> None:
    import prism_om.attach
    import prism_om.workers

    assert hasattr(prism_om.workers, name) or hasattr(prism_om.attach, name)
