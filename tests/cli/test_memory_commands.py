"""``observe`` says why nothing was recorded; ``compact`` refuses to fold history into nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from support.cli import failed, ok, run_cli


def _chat(lines: int) -> str:
    rows = []
    for n in range(lines):
        role = "user" if n % 2 == 0 else "assistant"
        text = f"Message {n}: ship build {n} on 2026-04-0{n % 9 + 1}, owner Dana, budget 4200 EUR."
        rows.append(json.dumps({"role": role, "content": text}))
    return "\n".join(rows) + "\n"


def _import(tmp_path: Path, lines: int, session: str) -> None:
    (tmp_path / f"{session}.jsonl").write_text(_chat(lines), encoding="utf-8")
    ok(
        run_cli(
            "import", f"{session}.jsonl", "--format", "openai", "--session", session,
            "--db", "store.db", cwd=tmp_path,
        )
    )  # fmt: skip


def _compactions(tmp_path: Path, session: str) -> int:
    with sqlite3.connect(tmp_path / "store.db") as conn:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM entries WHERE session_id = ? AND kind = 'compaction'",
            (session,),
        ).fetchone()
    return int(count)


def test_observe_says_nothing_is_unobserved_and_force_does_not_pretend(tmp_path: Path) -> None:
    _import(tmp_path, 40, "chat")
    first = ok(run_cli("observe", "--session", "chat", "--db", "store.db", "--force", cwd=tmp_path))
    assert "observations recorded" in first
    for extra in ((), ("--force",)):
        again = ok(
            run_cli("observe", "--session", "chat", "--db", "store.db", *extra, cwd=tmp_path)
        )
        assert "every message is already observed" in again
        assert "below the thresholds" not in again
        assert "--force to observe" not in again


def test_observe_below_the_threshold_points_at_force(tmp_path: Path) -> None:
    _import(tmp_path, 2, "short")
    text = ok(run_cli("observe", "--session", "short", "--db", "store.db", cwd=tmp_path))
    assert "below observation.messageTokens (use --force to observe them now)" in text
    forced = ok(
        run_cli("observe", "--session", "short", "--db", "store.db", "--force", cwd=tmp_path)
    )
    assert "observations recorded" in forced


def test_compact_refuses_a_never_observed_session_without_force(tmp_path: Path) -> None:
    _import(tmp_path, 12, "raw")
    line = failed(run_cli("compact", "--session", "raw", "--db", "store.db", cwd=tmp_path), 2)
    assert "never observed" in line and "would be empty" in line and "--force" in line
    assert "keeping 12 message(s) verbatim" in line  # memory lacks them all: none folded
    assert _compactions(tmp_path, "raw") == 0  # refused before anything was written

    forced = run_cli("compact", "--session", "raw", "--db", "store.db", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "warning" in forced.stderr and "would be empty" in forced.stderr
    assert _compactions(tmp_path, "raw") == 1


def test_compact_after_observe_needs_no_force(tmp_path: Path) -> None:
    _import(tmp_path, 40, "seen")
    ok(run_cli("observe", "--session", "seen", "--db", "store.db", "--force", cwd=tmp_path))
    done = run_cli("compact", "--session", "seen", "--db", "store.db", "--json", cwd=tmp_path)
    assert done.returncode == 0 and "warning" not in done.stderr
    assert json.loads(done.stdout)["summaryTokens"] > 0
