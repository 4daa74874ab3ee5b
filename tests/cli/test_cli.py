"""The ``prism-om`` command, run as a subprocess against temporary stores."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support.cli import failed, ok, run_cli


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the demo's store (the default path), made once."""
    where = tmp_path_factory.mktemp("demo")
    out = ok(run_cli("demo", cwd=where))
    assert (where / "prism-om-demo.db").exists()
    (where / "demo-output.txt").write_text(out, encoding="utf-8")
    return where


def test_demo_runs_the_whole_lifecycle(demo_dir: Path) -> None:
    out = (demo_dir / "demo-output.txt").read_text(encoding="utf-8")
    for section in (
        "observations recorded in atlas-kickoff",
        "reflections recorded in atlas-kickoff",
        "compaction",
        "context the next turn would see",
        "[observational-memory]",
        "[recent-messages]",
        "recall by id",
        "exact source entries",
        "a page of raw messages",
    ):
        assert section in out, section
    assert "migration 0042" in out
    # Running it again starts from a fresh file.
    again = ok(run_cli("demo", "--db", "prism-om-demo.db", cwd=demo_dir))
    assert "atlas-kickoff" in again


def test_read_commands_on_the_demo_store(demo_dir: Path) -> None:
    rows = json.loads(ok(run_cli("sessions", "--json", cwd=demo_dir)))
    assert [r["session"] for r in rows] == ["atlas-kickoff", "atlas-go-no-go"]
    assert all(r["entries"] > r["messages"] >= 30 and r["leaves"] == 1 for r in rows)
    assert "atlas-go-no-go" in ok(run_cli("sessions", cwd=demo_dir))

    status = json.loads(ok(run_cli("status", "--session", "atlas-kickoff", "--json", cwd=demo_dir)))
    assert status["observations"]["recorded"] > 0 and status["reflections"]["recorded"] > 0
    assert status["tokens"]["renderedMemory"] > 0

    view = json.loads(
        ok(run_cli("view", "--session", "atlas-kickoff", "--full", "--json", cwd=demo_dir))
    )
    assert view["mode"] == "full" and view["observationIds"]
    assert "# Observational memory" in ok(
        run_cli("view", "--session", "atlas-kickoff", cwd=demo_dir)
    )

    memory_id = view["observationIds"][0]
    recalled = json.loads(
        ok(run_cli("recall", memory_id, "--session", "atlas-kickoff", "--json", cwd=demo_dir))
    )
    assert recalled["found"] and recalled["sources"]
    cursor = recalled["sources"][0]["id"]
    text = ok(run_cli("recall", memory_id, "--session", "atlas-kickoff", cwd=demo_dir))
    assert memory_id in text and cursor in text

    page = json.loads(
        ok(
            run_cli(
                "page",
                "--session",
                "atlas-kickoff",
                "--cursor",
                cursor,
                "--limit",
                "3",
                "--json",
                cwd=demo_dir,
            )
        )
    )
    assert len(page["messages"]) == 3 and page["direction"] == "forward"
    back = json.loads(
        ok(
            run_cli(
                "page",
                "--session",
                "atlas-kickoff",
                "--cursor",
                cursor,
                "--backward",
                "--detail",
                "full",
                "--json",
                cwd=demo_dir,
            )
        )
    )
    assert back["direction"] == "backward" and "message" in back["messages"][0]


def test_observe_and_compact_write_memory(demo_dir: Path) -> None:
    flushed = json.loads(
        ok(run_cli("observe", "--session", "atlas-go-no-go", "--force", "--json", cwd=demo_dir))
    )
    assert flushed["status"] == "completed"
    assert {o["worker"] for o in flushed["outcomes"]} == {
        "observer",
        "reflector",
        "consolidator",
        "dropper",
    }
    compacted = json.loads(
        ok(run_cli("compact", "--session", "atlas-go-no-go", "--json", cwd=demo_dir))
    )
    assert compacted["trigger"] == "manual" and len(compacted["keepEntryIds"]) == 8
    assert compacted["summaryTokens"] > 0
    text = ok(run_cli("observe", "--session", "atlas-go-no-go", cwd=demo_dir))
    assert "observer" in text


def _chat(lines: int) -> str:
    rows = []
    for n in range(lines):
        role = "user" if n % 2 == 0 else "assistant"
        rows.append(
            json.dumps(
                {"role": role, "content": f"Message {n}: ship build {n} on 2026-04-0{n % 9 + 1}."}
            )
        )
    return "\n".join(rows) + "\n"


def test_import_then_observe_on_a_jsonl_store(tmp_path: Path) -> None:
    (tmp_path / "chat.jsonl").write_text(_chat(40), encoding="utf-8")
    done = json.loads(
        ok(
            run_cli(
                "import",
                "chat.jsonl",
                "--format",
                "openai",
                "--session",
                "chat",
                "--db",
                "jsonl:store",
                "--json",
                cwd=tmp_path,
            )
        )
    )
    assert done["sessionId"] == "chat" and done["entries"] == 40
    text = ok(run_cli("import", "chat.jsonl", "--db", "notes.db", cwd=tmp_path))
    assert "imported 40 entries" in text and "as session chat-" in text
    observed = ok(
        run_cli("observe", "--session", "chat", "--db", "jsonl:store", "--force", cwd=tmp_path)
    )
    assert "observations recorded" in observed
    # The same session name again is refused: an import never adds to a session.
    line = failed(
        run_cli("import", "chat.jsonl", "--session", "chat", "--db", "jsonl:store", cwd=tmp_path), 2
    )
    assert "already exists" in line


def test_bad_input_is_one_line_and_exit_2(demo_dir: Path, tmp_path: Path) -> None:
    line = failed(run_cli("status", "--session", "nope", cwd=demo_dir), 2)
    assert "no session 'nope'" in line
    failed(run_cli("view", "--session", "x", "--db", "missing.db", cwd=tmp_path), 2)
    assert not (tmp_path / "missing.db").exists()  # a read never creates a store
    failed(run_cli("recall", "not-an-id", "--session", "atlas-kickoff", cwd=demo_dir), 2)
    failed(run_cli("recall", "aaaaaaaaaaaa", "--session", "atlas-kickoff", cwd=demo_dir), 2)
    line = failed(
        run_cli(
            "page",
            "--session",
            "atlas-kickoff",
            "--cursor",
            "nope",
            "--limit",
            "101",
            cwd=demo_dir,
        ),
        2,
    )
    assert "100" in line
    failed(run_cli("page", "--session", "atlas-kickoff", "--cursor", "nope", cwd=demo_dir), 2)
    assert "unknown store URL" in failed(
        run_cli("sessions", "--db", "ftp:nowhere", cwd=tmp_path), 2
    )
    failed(run_cli("frobnicate", cwd=tmp_path), 2)
    failed(run_cli("status", cwd=tmp_path), 2)
    failed(
        run_cli("observe", "--session", "atlas-kickoff", "--provider", "openai", cwd=demo_dir), 2
    )
    (tmp_path / "notes.txt").write_text("not a database", encoding="utf-8")
    failed(run_cli("demo", "--db", "notes.txt", cwd=tmp_path), 2)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "not a database"


def test_malformed_import_names_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    good = _chat(4).splitlines()
    (tmp_path / "broken.jsonl").write_text("\n".join([*good[:2], "{oops", *good[2:]]) + "\n")
    line = failed(run_cli("import", "broken.jsonl", "--db", "s.db", cwd=tmp_path), 2)
    assert "broken.jsonl" in line and "line 3" in line
    failed(run_cli("import", "absent.jsonl", "--db", "s.db", cwd=tmp_path), 2)
    if (tmp_path / "s.db").exists():
        with sqlite3.connect(tmp_path / "s.db") as conn:
            assert conn.execute("SELECT count(*) FROM entries").fetchone() == (0,)
        conn.close()


def test_schema_dialects_and_debug(tmp_path: Path) -> None:
    sqlite_text = ok(run_cli("schema", cwd=tmp_path))
    assert "CREATE TABLE IF NOT EXISTS sessions" in sqlite_text
    postgres = ok(run_cli("schema", "--dialect", "postgres", cwd=tmp_path))
    assert "transpiled from SQLite to postgres" in postgres and "CREATE TABLE" in postgres
    assert "sqlglot knows" in failed(run_cli("schema", "--dialect", "klingon", cwd=tmp_path), 2)
    debug = run_cli("--debug", "sessions", "--db", "ftp:x", cwd=tmp_path)
    assert debug.returncode == 2 and "Traceback" in debug.stderr


def test_help_documents_exit_codes(tmp_path: Path) -> None:
    text = ok(run_cli("--help", cwd=tmp_path))
    assert "exit codes" in text and "prism-om-demo.db" in text
    assert "default: ./prism-om-demo.db" in ok(run_cli("demo", "--help", cwd=tmp_path))
