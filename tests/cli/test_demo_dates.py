"""The demo prints only correct dates (issue 31): its first screen said ``2.4 ships Tuesday
(3 March 2026) 2026-03-17`` on the code before, the weekday beside a written date resolved
again against the message's time."""

from __future__ import annotations

from pathlib import Path

from support.cli import ok, run_cli
from support.dates import wrong_dates


def test_the_checker_catches_the_dates_printed_before() -> None:
    assert wrong_dates("2.4 ships Tuesday (3 March 2026) 2026-03-17")
    assert wrong_dates("Atlas 2.4 ships Tuesday (8 December 2026) 2026-03-17")
    assert wrong_dates("the freeze is Monday 2026-03-11")
    assert not wrong_dates("ships Tuesday 2026-03-17; freeze Wednesday, 11 March 2026")


def test_the_demo_prints_only_correct_dates(tmp_path: Path) -> None:
    out = ok(run_cli("demo", cwd=tmp_path))
    assert "2026-03-17" in out
    assert wrong_dates(out) == []
    for view in ("atlas-kickoff", "atlas-go-no-go"):
        shown = ok(run_cli("view", "--session", view, cwd=tmp_path))
        assert wrong_dates(shown) == []
