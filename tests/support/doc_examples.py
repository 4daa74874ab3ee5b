"""Running the code blocks of the README and of the pages in ``docs/``, as a reader would.

A ``python`` block runs as a script of its own; a ``console`` block runs line by line, each
line that starts with ``prism-om`` run as ``python -m prism_om.cli`` (other lines, such as
a ``$ `` transcript with its output or one that sets a variable first, are shown, not run).
Every block of one document runs in one directory, in document order, so a later block may
use what an earlier one wrote. What a block prints is what a reader copies: its dates must
be right (``support.dates.wrong_dates``). ``sh`` blocks are install commands
(``tests/test_readme.py`` holds the README's two) and are not run here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from support.dates import wrong_dates

ROOT = Path(__file__).resolve().parents[2]
RUN = ("python", "console")


def blocks(text: str) -> list[tuple[str, str]]:
    """The ``python`` and ``console`` blocks of a Markdown text, in order."""
    found = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)
    return [(lang, body) for lang, body in found if lang in RUN]


def commands(body: str) -> list[str]:
    """The lines of a console block that are ``prism-om`` commands."""
    return [line for line in body.splitlines() if line.startswith("prism-om ")]


def chat_file(where: Path) -> None:
    """The ``chat.jsonl`` the ``prism-om import`` examples read."""
    lines = [
        {"role": "user", "content": "Atlas 2.4 ships on Tuesday 2026-03-17."},
        {"role": "assistant", "content": "Noted: Atlas 2.4 ships on 2026-03-17."},
        {"role": "user", "content": "Leo runs migration 0042 on Monday 2026-03-16 at 22:00."},
        {"role": "assistant", "content": "Migration 0042 is scheduled for 2026-03-16 22:00."},
    ]
    (where / "chat.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def run_blocks(found: list[tuple[str, str]], where: Path, label: str) -> None:
    """Run every block in ``where``; a block that fails names the document and the block."""
    env = {**os.environ, "COLUMNS": "120"}
    for number, (lang, body) in enumerate(found, 1):
        if lang == "python":
            script = where / f"example_{number}.py"
            script.write_text(body, encoding="utf-8")
            done = subprocess.run(
                [sys.executable, str(script)],
                cwd=where,
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
            )
            assert done.returncode == 0, f"{label} python block {number}:\n{done.stderr}"
            assert wrong_dates(done.stdout) == [], f"{label} python block {number}"
            continue
        for line in commands(body):
            done = subprocess.run(
                [sys.executable, "-m", "prism_om.cli", *shlex.split(line)[1:]],
                cwd=where,
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
            )
            assert done.returncode == 0, f"{label} command {line!r}:\n{done.stderr}"
            assert wrong_dates(done.stdout) == [], f"{label} command {line!r}"
