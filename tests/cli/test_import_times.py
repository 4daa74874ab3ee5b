"""``prism-om import --start-time/--interval``, and what it says when a file has no times."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from support.cli import failed, ok, run_cli

from prism_om.stores import open_store


def _chat(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "chat.jsonl"
    lines = [
        json.dumps(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"On day {i} Melanie said she would paint 3 pictures by Friday.",
            }
        )
        for i in range(count)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def _timestamps(db: Path) -> list[str]:
    async with await open_store(f"sqlite:{db}") as store:
        return [e.timestamp for e in await store.list("c")]


def _year(text: str) -> int:
    return datetime.fromisoformat(text).year


async def test_an_openai_file_without_times_never_shows_1970(tmp_path: Path) -> None:
    _chat(tmp_path, 8)
    done = run_cli("import", "chat.jsonl", "--session", "c", "--db", "s.db", cwd=tmp_path)
    ok(done)
    # The fallback is said on stderr, with the option that would do better.
    assert "prism-om: note: 8 of 8 messages carry no time" in done.stderr
    assert "dated back from the import time" in done.stderr and "--start-time" in done.stderr
    this_year = datetime.now(UTC).year
    (summary,) = json.loads(ok(run_cli("sessions", "--db", "s.db", "--json", cwd=tmp_path)))
    assert _year(summary["lastActivity"]) >= this_year - 1
    stamps = await _timestamps(tmp_path / "s.db")
    assert len(stamps) == 8 and all(_year(t) >= this_year - 1 for t in stamps)
    observed = json.loads(
        ok(run_cli("observe", "--session", "c", "--db", "s.db", "--force", "--json", cwd=tmp_path))
    )
    assert observed["status"] == "completed" and observed["observationIds"]
    view = ok(run_cli("view", "--session", "c", "--db", "s.db", "--json", cwd=tmp_path))
    # A date, not the digits: a random hex id can contain "1970".
    assert not re.search(r"19(69|70)-\d\d-\d\d", view)
    assert str(this_year) in view or str(this_year - 1) in view


async def test_start_time_and_interval_and_json(tmp_path: Path) -> None:
    _chat(tmp_path, 3)
    done = run_cli(
        "import",
        "chat.jsonl",
        "--db",
        "s.db",
        "--session",
        "c",
        "--start-time",
        "2023-07-20T20:56:00",
        "--interval",
        "120",
        "--json",
        cwd=tmp_path,
    )
    result = json.loads(ok(done))
    assert result["times"] == {
        "own": 0,
        "filled": 3,
        "fallback": "start-time",
        "interval": 120.0,
        "first": "2023-07-20T20:56:00.000Z",
        "last": "2023-07-20T21:00:00.000Z",
        "fromStart": 3,
        "fromNeighbours": 0,
        "fromImportTime": 0,
        "ignored": 0,
        "startTimeUnused": False,
    }
    # The note goes to stderr even with --json; stdout stays one JSON document.
    assert "3 dated from the start time; 120 s apart" in done.stderr
    assert await _timestamps(tmp_path / "s.db") == [
        "2023-07-20T20:56:00.000Z",
        "2023-07-20T20:58:00.000Z",
        "2023-07-20T21:00:00.000Z",
    ]


def test_a_dated_file_imports_without_a_note(tmp_path: Path) -> None:
    (tmp_path / "dated.json").write_text(
        json.dumps([{"role": "user", "content": "hi", "created": 1689886560}]), encoding="utf-8"
    )
    done = run_cli("import", "dated.json", "--db", "s.db", cwd=tmp_path)
    ok(done)
    assert "note" not in done.stderr


def test_bad_time_options_and_values_are_one_line_and_create_nothing(tmp_path: Path) -> None:
    _chat(tmp_path, 2)
    line = failed(
        run_cli("import", "chat.jsonl", "--db", "s.db", "--start-time", "soon", cwd=tmp_path), 2
    )
    assert "start time 'soon' is not an ISO 8601 time" in line
    line = failed(
        run_cli("import", "chat.jsonl", "--db", "s.db", "--interval", "-5", cwd=tmp_path), 2
    )
    assert "interval must not be negative" in line
    (tmp_path / "bad.jsonl").write_text(
        '{"role": "user", "content": "a"}\n{"role": "user", "content": "b", "time": "later"}\n',
        encoding="utf-8",
    )
    line = failed(run_cli("import", "bad.jsonl", "--db", "s.db", cwd=tmp_path), 2)
    assert "bad.jsonl: line 2: time 'later' is not ISO 8601" in line
    assert not (tmp_path / "s.db").exists()
