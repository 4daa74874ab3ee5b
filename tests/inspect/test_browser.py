"""The inspect page in a real browser: Debian's Chromium, driven by Python playwright.

Nothing is downloaded: playwright drives ``/usr/bin/chromium`` through
``executable_path``. Without the browser (or playwright) the test is skipped, unless
``PRISM_REQUIRE_BROWSER=1`` (set by ``.ci/run``), where it fails instead. The screenshot is
kept under pytest's tmp dir; ``PRISM_UPDATE_SCREENSHOT=1`` also writes ``docs/inspect.png``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
from pathlib import Path

import pytest
from support.inspect_server import serving
from support.inspect_store import SECRET, fill_store

from prism_om.stores import open_store

CHROMIUM = os.environ.get("PRISM_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
README_SHOT = Path(__file__).resolve().parents[2] / "docs" / "inspect.png"


def browser_or_skip() -> None:
    missing = []
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright package (pip install -e '.[test]')")
    if not Path(CHROMIUM).exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    if not missing:
        return
    reason = "no browser for the browser test: " + "; ".join(missing)
    if os.environ.get("PRISM_REQUIRE_BROWSER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def test_click_an_observation_see_its_sources_switch_branches(tmp_path: Path) -> None:
    browser_or_skip()
    from playwright.sync_api import expect, sync_playwright

    db = tmp_path / "store.db"

    async def fill() -> tuple[str, str, str]:
        async with await open_store(f"sqlite:{db}", create=True) as store:
            filled = await fill_store(store)
            first = (await store.ledger("demo")).observations[0].observation.id
        return first, filled.fork_leaf, filled.fork_text

    first, fork_leaf, fork_text = asyncio.run(fill())
    shot = tmp_path / "inspect.png"
    with (
        serving(str(db), cwd=tmp_path, secrets=SECRET) as (url, _),
        sync_playwright() as driver,
    ):
        context = driver.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            args=ARGS,
            headless=True,
            viewport={"width": 1200, "height": 900},
        )
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            page.fill("#filter", "dem")
            expect(page.locator('tr[data-session="other-session"]')).to_be_hidden()
            page.click('a[href="/s/demo"]')
            # Click an observation: its exact source messages appear in place.
            item = page.locator(f"#m-{first}")
            item.locator("button.recall-toggle").click()
            sources = item.locator(".recall .source")
            expect(sources.first).to_contain_text("billing service in Rust")
            expect(page.locator(".charts svg")).to_have_count(3)
            assert SECRET not in page.content()
            page.screenshot(path=str(shot), full_page=False)
            # Switch to the fork: its branch's timeline shows the fork's message.
            page.click(f'li.branch[data-leaf="{fork_leaf}"] a.leaf-link')
            expect(page.locator("#timeline")).to_contain_text(fork_text)
            expect(page.locator(f'li.branch.chosen[data-leaf="{fork_leaf}"]')).to_have_count(1)
            assert errors == []
        finally:
            context.close()
    assert shot.stat().st_size > 10_000
    if os.environ.get("PRISM_UPDATE_SCREENSHOT") == "1":
        README_SHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, README_SHOT)
