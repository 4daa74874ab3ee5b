"""``observe`` and ``compact`` honour the store's tombstones: a revoked message feeds nothing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prism_om import create_deletion_propagator
from prism_om.stores import open_store

SSN = "123-45-6789"


def _cli(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "prism_om.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def _revoke_first_message(url: str) -> str:
    store = await open_store(url)
    try:
        first = (await store.entries("r"))[0]
        await create_deletion_propagator(store).propagate("default", [first.id], reason="revoked")
        return first.id
    finally:
        await store.close()


async def _entries_json(url: str) -> list[tuple[str, str]]:
    store = await open_store(url)
    try:
        return [(e.id, e.model_dump_json()) for e in await store.entries("r")]
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_observe_and_compact_withhold_a_tombstoned_message(tmp_path: Path, kind: str) -> None:
    rows = [
        {"role": "user", "content": f"My SSN is {SSN}, keep it for the tax form."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "We ship billing 2.4 to staging on Friday with Sam."},
        {"role": "assistant", "content": "Friday it is."},
    ]
    (tmp_path / "rv.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    db = "rv.db" if kind == "sqlite" else "jsonl:rv"
    url = f"sqlite:{tmp_path / 'rv.db'}" if kind == "sqlite" else f"jsonl:{tmp_path / 'rv'}"
    _cli("import", "rv.jsonl", "--format", "openai", "--session", "r", "--db", db, cwd=tmp_path)
    revoked = asyncio.run(_revoke_first_message(url))

    out = _cli("observe", "--session", "r", "--db", db, "--force", cwd=tmp_path)
    assert SSN not in out
    assert "observations recorded" in out, "the other messages were observed"
    stored = asyncio.run(_entries_json(url))
    assert [i for i, text in stored if SSN in text] == [revoked]

    compacted = json.loads(
        _cli("compact", "--session", "r", "--db", db, "--force", "--json", cwd=tmp_path)
    )
    assert revoked not in compacted["keepEntryIds"]
    assert compacted["keepEntryIds"], "the window is taken from the other messages"
    stored = asyncio.run(_entries_json(url))
    assert [i for i, text in stored if SSN in text] == [revoked]
