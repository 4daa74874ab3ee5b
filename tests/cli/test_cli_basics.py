"""The command-line basics a user reaches for first (issue 17 item 3): ``--version``,
``delete`` on every adapter, ``status`` with tokens and thresholds, full-width piped output,
and install hints that work from PyPI and from a clone."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import prism_om
from prism_om.cli.app import main
from prism_om.observational_memory.revocation import create_deletion_propagator
from prism_om.session import Session
from prism_om.stores import open_store
from prism_om.testing.om_factories import random_builder


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command as a script runs it: stdin is not a terminal, stdout is a pipe."""
    base = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "prism_om.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, **(env or {})},
    )


def test_version() -> None:
    done = run("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"prism-om {prism_om.__version__}\n"


# -- delete -------------------------------------------------------------------------------


async def _fill(url: str) -> dict[str, list[dict[str, object]]]:
    async with await open_store(url) as store:
        for seed, sid in enumerate(("keep", "gone")):
            for entry in random_builder(seed, 40, session_id=sid).entries:
                await store.append(entry)
        await create_deletion_propagator(store).propagate(
            "privacy", ["keep.00002"], reason="revoked"
        )
        return {sid: [e.to_wire() for e in await store.list(sid)] for sid in ("keep", "gone")}


async def _listed(url: str) -> tuple[list[str], list[dict[str, object]]]:
    async with await open_store(url, read_only=True) as store:
        return await store.sessions(), [e.to_wire() for e in await store.list("keep")]


@pytest.fixture(params=["sqlite", "jsonl", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    if request.param == "jsonl":
        return f"jsonl:{tmp_path / 'store'}"
    return f"sqlite:{tmp_path / 'store.db'}"


async def test_delete_on_every_adapter(store_url: str) -> None:
    before = await _fill(store_url)

    refused = await asyncio.to_thread(run, "delete", "gone", "--db", store_url)
    assert refused.returncode == 2
    assert "without --yes" in refused.stderr and "not a terminal" in refused.stderr
    sessions, _ = await _listed(store_url)
    assert "gone" in sessions

    done = await asyncio.to_thread(run, "delete", "gone", "--db", store_url, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["deletedEntries"] == len(before["gone"])
    sessions, kept = await _listed(store_url)
    assert sessions == ["keep", "tombstones.privacy"]
    assert kept == before["keep"]  # the other session is untouched
    if not store_url.startswith("postgresql"):
        checked = await asyncio.to_thread(run, "check", "--db", store_url)
        assert checked.returncode == 0, checked.stdout + checked.stderr

    again = await asyncio.to_thread(run, "delete", "gone", "--db", store_url, "--yes")
    assert again.returncode == 2 and "no session 'gone'" in again.stderr

    # A tombstone session records revocations: erasing it would un-revoke, so it is refused.
    tomb = await asyncio.to_thread(run, "delete", "tombstones.privacy", "--db", store_url, "--yes")
    assert tomb.returncode == 2 and "revoked memory readable again" in tomb.stderr
    sessions, _ = await _listed(store_url)
    assert "tombstones.privacy" in sessions


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "deleted"), [("n\n", False), ("\n", False), ("y\n", True)])
def test_delete_asks_on_a_terminal(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: str,
    deleted: bool,
) -> None:
    url = f"sqlite:{tmp_path / 'store.db'}"
    asyncio.run(_fill(url))
    monkeypatch.setattr(sys, "stdin", _Terminal(answer))
    assert main(["delete", "gone", "--db", url]) == 0
    assert "cannot be undone" in capsys.readouterr().err
    sessions, _ = asyncio.run(_listed(url))
    assert ("gone" not in sessions) is deleted


def test_delete_refuses_a_memory_store() -> None:
    done = run("delete", "gone", "--db", "memory:", "--yes")
    assert done.returncode == 2 and "in-memory store" in done.stderr


# -- status, piped output, install hints -------------------------------------------------


def _chat(db: Path, texts: list[str]) -> None:
    async def build() -> None:
        async with await open_store(f"sqlite:{db}") as store:
            session = Session(store, "s1")
            for n, text in enumerate(texts):
                await session.append_message("user" if n % 2 == 0 else "assistant", text)

    asyncio.run(build())


def test_status_shows_transcript_tokens_and_thresholds(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    _chat(db, [f"message {n} about the billing migration to PostgreSQL" for n in range(12)])
    status = run("status", "--db", str(db), "--session", "s1", "--json")
    assert status.returncode == 0, status.stderr
    figures = json.loads(status.stdout)
    tokens = figures["transcript"]
    assert tokens["branchTokens"] > 0
    assert tokens["unobservedMessageTokens"] == tokens["branchTokens"]  # nothing observed
    assert tokens["unreflectedObservationTokens"] == 0
    assert figures["thresholds"] == {
        "observation.messageTokens": 10_000,
        "reflection.observationTokens": 20_000,
        "context.compactAfterTokens": 81_000,
    }
    text = run("status", "--db", str(db), "--session", "s1").stdout
    assert f"transcript: {tokens['branchTokens']:,} tokens" in text
    assert "observation.messageTokens 10,000: observer waits" in text

    assert run("observe", "--db", str(db), "--session", "s1", "--force").returncode == 0
    after = json.loads(run("status", "--db", str(db), "--session", "s1", "--json").stdout)
    assert after["transcript"]["unobservedMessageTokens"] == 0
    assert after["transcript"]["unreflectedObservationTokens"] >= 0


def test_piped_page_text_is_not_wrapped_at_80_columns(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    long = " ".join(f"word{n}" for n in range(120))  # ~800 characters
    _chat(db, [long, "short reply"])

    async def first_id() -> str:
        async with await open_store(f"sqlite:{db}") as store:
            return (await store.list("s1"))[-1].id  # the page before it holds the long one

    entry_id = asyncio.run(first_id())
    done = run(
        "page",
        "--db",
        str(db),
        "--session",
        "s1",
        "--cursor",
        entry_id,
        "--backward",
        "--detail",
        "full",
    )
    assert done.returncode == 0, done.stderr
    assert any(long in line for line in done.stdout.splitlines()), done.stdout
    # --width sets a width when asked for (an exported COLUMNS does not: see
    # tests/cli/test_output_width.py).
    narrow = run(
        "page",
        "--db",
        str(db),
        "--session",
        "s1",
        "--cursor",
        entry_id,
        "--detail",
        "full",
        "--width",
        "80",
    )
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 80


def test_a_missing_openai_extra_names_both_install_commands(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    _chat(db, ["hello", "hi"])
    code = (
        "import sys; sys.modules['httpx'] = None\n"
        "from prism_om.cli.app import main\n"
        "sys.exit(main(['observe', '--db', sys.argv[1], '--session', 's1', '--provider',"
        " 'openai', '--base-url', 'http://127.0.0.1:9', '--model', 'm', '--force']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(db)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert "pip install 'prism-om[openai]'" in done.stderr
    assert "pip install '.[openai]'" in done.stderr
