"""Every example of the pages in ``docs/`` runs, so the manual cannot drift.

A page's ``python`` and ``console`` blocks run in page order, in a temporary directory of
the page's own (a later block may use files an earlier one wrote), the way the README's
do (``support.doc_examples``): a python block as a script, each ``prism-om`` line of a
console block as a command. The directory links ``tests/data`` of the checkout, so a page
may name the committed sample files as a reader in the checkout would (``docs/eval.md``
does); a page whose commands read other files gets them first (``FILES``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from support.doc_examples import ROOT, blocks, chat_file, commands, run_blocks

DOCS = ROOT / "docs"
PAGES = sorted(page for page in DOCS.rglob("*.md") if blocks(page.read_text(encoding="utf-8")))
# What a page's examples read, made before its first block runs.
FILES: dict[str, list[Callable[[Path], None]]] = {"cli.md": [chat_file]}


def _name(page: Path) -> str:
    return page.relative_to(DOCS).as_posix()


def test_some_page_has_an_example() -> None:
    assert PAGES
    names = {_name(page) for page in PAGES}
    # The manual's command-line page runs commands, not only Python.
    assert "cli.md" in names and "python-api.md" in names
    cli = blocks((DOCS / "cli.md").read_text(encoding="utf-8"))
    assert sum(len(commands(body)) for lang, body in cli if lang == "console") >= 10


def test_every_page_needing_files_exists() -> None:
    assert sorted(FILES) == sorted(name for name in FILES if (DOCS / name).exists())


@pytest.mark.parametrize("page", PAGES, ids=[_name(p) for p in PAGES])
def test_every_block_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    for make in FILES.get(_name(page), []):
        make(tmp_path)
    run_blocks(blocks(page.read_text(encoding="utf-8")), tmp_path, _name(page))


def test_a_failing_command_or_block_fails_the_page(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=re.escape("'prism-om sessions --db missing.db'")):
        run_blocks([("console", "prism-om sessions --db missing.db\n")], tmp_path, "page.md")
    with pytest.raises(AssertionError, match=re.escape("page.md python block 2")):
        run_blocks(
            [("python", "print(1)\n"), ("python", "raise SystemExit(3)\n")], tmp_path, "page.md"
        )
    # A transcript line ($ and its output) is shown, not run.
    run_blocks([("console", "$ prism-om nonsense\nno such command\n")], tmp_path, "page.md")
