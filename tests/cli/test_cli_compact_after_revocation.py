"""Revoking one observation's source withholds its reflection, not the rest of memory."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from prism_om import create_deletion_propagator
from prism_om.stores import open_store

SSN = "123-45-6789"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prism_om.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "120"},
    )


async def _revoke_first_message(url: str) -> str:
    store = await open_store(url)
    try:
        first = (await store.entries("r"))[0]
        await create_deletion_propagator(store).propagate("default", [first.id], reason="revoked")
        ledger = await store.ledger("r")
        assert ledger.reflections, "the reflection over both observations was recorded"
        return first.id
    finally:
        await store.close()


def test_compact_after_revoking_a_reflected_source_needs_no_force(tmp_path: Path) -> None:
    rows = [
        {"role": "user", "content": f"My SSN is {SSN}, keep it safe please."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Ship on Friday 2026-12-04 with Sam."},
    ]
    (tmp_path / "kc.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    db = ("--db", "kc.db")
    imported = _cli("import", "kc.jsonl", "--format", "openai", "--session", "r", *db, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    observed = _cli("observe", "--session", "r", *db, "--force", cwd=tmp_path)
    assert observed.returncode == 0, observed.stderr
    revoked = asyncio.run(_revoke_first_message(f"sqlite:{tmp_path / 'kc.db'}"))

    status = _cli("status", "--session", "r", *db, "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert SSN not in status.stdout
    done = _cli("compact", "--session", "r", *db, "--json", cwd=tmp_path)
    # Nothing but the revoked message is folded away: the memory left rests on the kept
    # messages, so an empty summary loses nothing and needs no --force.
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    keep = json.loads(done.stdout)["keepEntryIds"]
    assert revoked not in keep and len(keep) == 2
