"""The manual holds together: every page of ``docs/`` is in ``mkdocs.yml``'s nav, every
relative link of the manual and the README reaches a file (and a heading, when it names
one), every ``prism-om`` command has its section in ``docs/cli.md`` (as sqlite-utils checks
its CLI reference), and ``mkdocs build --strict`` builds the site."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from prism_om.cli.app import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
DOCUMENTS = [*PAGES, ROOT / "README.md"]
NAV = re.findall(r"^\s*- (?:[^\n]*?: )?([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
IDS = [document.relative_to(ROOT).as_posix() for document in DOCUMENTS]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(path: Path) -> str:
    """The Markdown outside code blocks, where a ``](...)`` is a link."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc (and so mkdocs) gives a heading."""
    text = re.sub(r"[`*]", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(path: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", _prose(path), flags=re.M)}


def _subcommands() -> set[str]:
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(action.choices)


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    pages = sorted(page.relative_to(DOCS).as_posix() for page in PAGES)
    assert sorted(NAV) == pages
    assert NAV[0] == "index.md"


@pytest.mark.parametrize("document", DOCUMENTS, ids=IDS)
def test_every_relative_link_resolves(document: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(document)):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto: leave the checkout
        path, _, anchor = target.partition("#")
        reached = (document.parent / path).resolve() if path else document
        missing_anchor = bool(anchor) and reached.suffix == ".md"
        if not reached.exists() or (missing_anchor and anchor not in _anchors(reached)):
            broken.append(target)
    assert broken == []


def test_the_link_check_sees_a_broken_link_and_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n## prism-om check\n\n[a](page.md#prism-om-check) [b](#top)\n")
    assert _anchors(page) == {"top", "prism-om-check"}
    assert LINK.findall(_prose(page)) == ["page.md#prism-om-check", "#top"]
    fenced = "```console\n[not](a-link.md)\n```\n"
    assert LINK.findall(FENCE.sub("", fenced)) == []


def test_every_command_has_its_section_in_the_cli_page() -> None:
    cli = (DOCS / "cli.md").read_text(encoding="utf-8")
    documented = re.findall(r"^## prism-om (\S+)$", cli, flags=re.M)
    assert len(documented) == len(set(documented))
    assert set(documented) == _subcommands()


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")  # the docs extra, part of the test extra
    site = tmp_path / "site"
    config = str(ROOT / "mkdocs.yml")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", config, "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (site / "index.html").exists()
    assert (site / "cli" / "index.html").exists()
    assert not (ROOT / "site").exists()
