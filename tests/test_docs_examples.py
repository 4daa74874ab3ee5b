"""Every Python example of the pages in ``docs/`` runs, so the manual cannot drift.

Each block runs in a subprocess of its own, in a temporary directory per page, in page
order (a page's later blocks may use files its earlier ones wrote). The directory links
``tests/data`` of the checkout, so a page may name the committed sample files as a reader
in the checkout would. The README's examples are ``tests/test_readme_examples.py``'s.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(
    page
    for page in DOCS.glob("*.md")
    if re.search(r"```python\n", page.read_text(encoding="utf-8"))
)


def test_some_page_has_an_example() -> None:
    assert PAGES


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_python_block_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    for number, body in enumerate(blocks, 1):
        script = tmp_path / f"block_{number}.py"
        script.write_text(body, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{page.name} python block {number}:\n{done.stderr}"
