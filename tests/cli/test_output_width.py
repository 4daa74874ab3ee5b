"""Piped output is never wrapped by an exported ``COLUMNS``; ``--width N`` wraps it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prism_om.cli.app import main

_VIEW = (sys.executable, "-m", "prism_om.cli", "view")
LONG = " ".join(f"word{n}" for n in range(120))  # ~800 characters


def _page(db: Path, *extra: str, columns: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run(
        [*_VIEW, "--db", str(db), "--session", "s1", "--full", *extra],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_piped_output_ignores_columns_and_follows_width(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    assert main(["import", "--db", str(db), "--session", "s1", _chat_file(tmp_path)]) == 0
    assert main(["observe", "--db", str(db), "--session", "s1", "--force", "--json"]) == 0
    plain = _page(db, columns=None)
    assert max(len(line) for line in plain.splitlines()) > 100
    assert _page(db, columns="60") == plain
    narrow = _page(db, "--width", "60", columns="300")
    assert max(len(line) for line in narrow.splitlines()) <= 60
    top_level = subprocess.run(
        [*_VIEW[:-1], "--width", "60", "view", "--db", str(db), "--session", "s1", "--full"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert top_level.stdout == narrow


def _chat_file(directory: Path) -> str:
    path = directory / "chat.jsonl"
    lines = [
        f'{{"role": "{role}", "content": "{text}"}}'
        for role, text in [("user", LONG), ("assistant", "noted " + LONG)]
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)
