"""``prism-om import`` notes an unused ``--start-time`` and epoch placeholders on stderr."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.cli import ok, run_cli


def test_the_note_says_an_unused_start_time_and_ignored_placeholders(tmp_path: Path) -> None:
    records = [
        {"role": "user", "content": "hi", "created_at": "2024-05-01T12:00:00+02:00"},
        {"role": "assistant", "content": "hello", "created_at": 0},
    ]
    (tmp_path / "chat.json").write_text(json.dumps(records), encoding="utf-8")
    done = run_cli(
        "import", "chat.json", "--session", "c", "--db", "s.db",
        "--start-time", "2024-01-01T00:00:00Z", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    times = json.loads(ok(done))["times"]
    assert (times["own"], times["fromNeighbours"], times["ignored"]) == (1, 1, 1)
    assert times["startTimeUnused"] is True
    assert times["first"] == "2024-05-01T10:00:01.000Z"
    assert "1 epoch time(s) before 2000 (first at index 1, created_at 0)" in done.stderr
    assert "the start time was not used" in done.stderr
    # A date, not the digits: a random hex id can contain "1970".
    assert not re.search(r"19(69|70)-\d\d-\d\d", done.stderr + done.stdout)
