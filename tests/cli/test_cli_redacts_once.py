"""The CLI redacts memory text exactly once: what it prints (and what ``compact`` records)
equals the core redactor's output, even where one secret is part of the marker or two
secrets overlap (a second pass would find secrets inside the first pass's markers)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from prism_om.cli.app import main
from prism_om.core.redaction import Redactor
from prism_om.session import Session
from prism_om.stores import open_store

# "RED" and "ACTED]" are pieces of the marker; "e" is in it once redacted in lowercase
# text around it; "brother R" overlaps "RED" and "e".
SECRETS = ["RED", "ACTED]", "e", "brother R"]
MESSAGE = "My brother REDACTED] lives in Lisbon with [REDACTED] the other brother."


async def _build(db: Path) -> None:
    async with await open_store(f"sqlite:{db}") as store:
        session = Session(store, "s1")
        await session.append_message("user", MESSAGE)
        # Chatter past the recent-message window (8), so the observation of MESSAGE is
        # visible memory, not only the reflection indexing it.
        for n in range(10):
            await session.append_message("assistant" if n % 2 == 0 else "user", "Noted.")


@pytest.fixture
def store_db(tmp_path: Path) -> Path:
    db = tmp_path / "store.db"
    asyncio.run(_build(db))
    assert main(["observe", "--db", str(db), "--session", "s1", "--force", "--json"]) == 0
    return db


def _memory_texts(db: Path) -> list[str]:
    async def run() -> list[str]:
        async with await open_store(f"sqlite:{db}") as store:
            ledger = await store.ledger("s1")
            # The offline reflection only restates the observation shown beside it, so
            # the render leaves it out (core/render.py); reflection lines' single pass is
            # tested in tests/core/test_render_redaction_single_pass.py.
            assert ledger.reflections
            return [r.observation.text for r in ledger.observations]

    return asyncio.run(run())


def _secret_args() -> list[str]:
    return [arg for secret in SECRETS for arg in ("--secret", secret)]


def _assert_redacted_once(output: str, texts: list[str]) -> None:
    red = Redactor(SECRETS)
    # The observation keeps the overlapping secrets (the offline observer drops "My").
    assert texts and all("brother REDACTED] lives" in t for t in texts[:1])
    for text in texts:
        once, twice = red.text(text), red.text(red.text(text))
        assert once != twice  # the case can tell one pass from two
        assert once in output, (once, output)
        assert twice not in output


@pytest.mark.parametrize("full", [False, True], ids=["visible", "full"])
def test_view_prints_memory_redacted_once(
    store_db: Path, capsys: pytest.CaptureFixture[str], full: bool
) -> None:
    texts = _memory_texts(store_db)
    capsys.readouterr()
    args = ["view", "--db", str(store_db), "--session", "s1", "--json", *_secret_args()]
    assert main([*args, "--full"] if full else args) == 0
    _assert_redacted_once(json.loads(capsys.readouterr().out)["text"], texts)


def test_view_line_equals_the_core_redactor_on_the_whole_line(
    store_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reviewer's case: ``other`` with secrets RED, ACTED] and e is ``oth[REDACTED]r``."""
    capsys.readouterr()
    args = ["view", "--db", str(store_db), "--session", "s1", "--json", "--full"]
    assert main([*args, "--secret", "RED", "--secret", "ACTED]", "--secret", "e"]) == 0
    text = json.loads(capsys.readouterr().out)["text"]
    assert "oth[REDACTED]r" in text and "oth[[REDACTED][REDACTED]r" not in text
    assert "[REDACTED][REDACTED] liv[REDACTED]s" in text


def test_compact_records_a_summary_redacted_once(
    store_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = _memory_texts(store_db)
    args = ["compact", "--db", str(store_db), "--session", "s1", "--json", *_secret_args()]
    assert main(args) == 0
    entry_id = json.loads(capsys.readouterr().out)["entryId"]

    async def summary() -> str:
        async with await open_store(f"sqlite:{store_db}") as store:
            entry = next(e for e in await store.list("s1") if e.id == entry_id)
            return entry.summary or ""

    _assert_redacted_once(asyncio.run(summary()), texts)
