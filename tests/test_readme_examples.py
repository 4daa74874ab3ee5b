"""Every example of the README runs, so the README cannot drift from the code.

Python blocks run in a subprocess each, and console blocks run line by line (each line
is a ``prism-om`` command, run as ``python -m prism_om.cli``), all in one temporary
directory, in README order (``support.doc_examples``). The two set-up commands at the top
are ``tests/test_readme.py``'s; the manual's examples are ``tests/test_docs_examples.py``'s.
Every date an example prints must be right (``support.dates.wrong_dates``): the memory
example printed ``Atlas 2.4 ships Tuesday (8 December 2026) 2026-03-17`` on the code before
issue 31, the weekday beside a written date resolved again against the day it ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.doc_examples import ROOT, blocks, run_blocks

README = (ROOT / "README.md").read_text(encoding="utf-8")
EXAMPLES = blocks(README)


def test_the_readme_has_examples() -> None:
    assert any(lang == "python" for lang, _ in EXAMPLES)
    assert any(lang == "console" for lang, _ in EXAMPLES)


def test_every_readme_example_runs(tmp_path: Path) -> None:
    run_blocks(EXAMPLES, tmp_path, "README")


@pytest.mark.parametrize("name", ["OfflineMemoryProvider", "create_observational_memory"])
def test_readme_names_exist(name: str) -> None:
    import prism_om.attach
    import prism_om.workers

    assert hasattr(prism_om.workers, name) or hasattr(prism_om.attach, name)
