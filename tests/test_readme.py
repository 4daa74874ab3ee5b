"""The README's first two commands stay true, and the README stays a ten-minute read."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.+?)\n```", text, flags=re.S)[:2]


def test_readme_starts_with_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    head = text.split("\n## ", 1)[0]
    assert head.count("```sh") == 2
    main_job, tests = _commands()
    assert "prism-om demo" in main_job
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _commands()[1] in ci.splitlines()


def test_the_readme_is_short_and_points_to_the_manual() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "(docs/index.md)" in text and "(docs/cli.md)" in text
    assert text.count("```python") == 1 and text.count("```console") == 1
