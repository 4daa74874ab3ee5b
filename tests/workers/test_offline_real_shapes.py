"""The offline observer on data shaped like the real thing (issue 31).

``tests/data/memory_quality/`` holds a multi-session dialog (OpenAI chat export shape, a
speaker's name opening each message, months between sessions) and two coding sessions: a
pi session file (tool calls and results, shell commands the user ran, a ``find .``
listing of ``.git/objects``, a diff, a traceback, a debug line repeated 33 times, a code
block, backticked commands) and an OpenAI chat export with ``tool_calls``. Each is
imported with the package's importer and observed by the shipped offline workers; each
test names the defect of the code before that it holds off.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from prism_om.core.records import Observation
from prism_om.core.render import render_observational_memory
from prism_om.importers.api import import_conversation
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.workers import (
    OFFLINE_MODEL,
    OfflineMemoryProvider,
    create_observational_memory_runtime,
)
from prism_om.workers.offline import extract_observations
from prism_om.workers.offline_tools import summarize_tool_result
from prism_om.workers.transcript import ParsedEntry

DATA = Path(__file__).resolve().parent.parent / "data" / "memory_quality"
_MONTHS = "January February March April May June July August September October November December"


async def observe(path: Path) -> list[Observation]:
    """The file imported and observed (one forced flush), its observations in order."""
    store = MemoryStore()
    imported = await import_conversation(store, path)
    session = Session(store, imported.session_id)
    provider = OfflineMemoryProvider()
    runtime = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": provider},
        reflection={"provider": provider},
        dropper={"policy": "lowest-relevance"},
        session_model=OFFLINE_MODEL,
    )
    assert (await runtime.flush(force=True)).status == "completed"
    ledger = await store.ledger(imported.session_id)
    return [r.observation for r in ledger.observations]


def memory_of(observations: list[Observation]) -> str:
    return "\n".join(o.text for o in observations)


def with_headers(tmp_path: Path) -> Path:
    """The dialog as a benchmark transcript writes it: no timestamps (the import stamps
    every message with the import's time), a date header opening each message."""
    rows = []
    for line in (DATA / "dialog.jsonl").read_text().splitlines():
        row = json.loads(line)
        stamp = row.pop("timestamp")
        year, month, day = (int(p) for p in stamp[:10].split("-"))
        hour, minute = int(stamp[11:13]), stamp[14:16]
        half = "am" if hour < 12 else "pm"
        name = _MONTHS.split()[month - 1]
        header = f"[{hour % 12 or 12}:{minute} {half} on {day} {name}, {year}]"
        rows.append({**row, "content": f"{header} {row['content']}"})
    path = tmp_path / "dialog_headers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
async def dialog() -> str:
    return memory_of(await observe(DATA / "dialog.jsonl"))


async def test_names_after_commas_survive(dialog: str) -> None:
    # Before: "my home country, Sweden," -> "home country,"; "My friend, Jean, came" ->
    # "friend, came": a name between commas was taken for a form of address.
    assert "home country, Sweden" in dialog
    assert "friend, Jean, came" in dialog
    assert "sister, Ana, lives" in dialog
    # A name that closes the sentence, said to the other speaker, is still an address.
    assert "Caroline!" not in dialog and "great, Caroline" not in dialog


@pytest.mark.parametrize(
    "resolved",
    [
        "four years ago (2019)",  # a year as a year
        "Last year (2022)",
        "Two years ago (2021)",
        "Next year (2024)",
        "last night (7 May 2023)",
        "before yesterday (6 May 2023)",  # -2 days, not yesterday's date
        "after tomorrow (10 May 2023)",  # +2 days, not tomorrow's
        "Next month (June 2023)",  # a month as a month, not an invented day
        "last month (June 2023)",
        "Last week (the week of 1 May 2023)",  # a week as the week of its Monday
        "next week (the week of 24 July 2023)",
        "Three weeks ago (the week of 11 September 2023)",
        "Last weekend (the weekend of 15 July 2023)",
        "Next Friday (12 May 2023)",
        "(a few days before 8 May 2023)",  # not certain: said as it is, anchored
        "Yesterday (19 July 2023)",  # against its own session's day
    ],
)
async def test_relative_dates_are_resolved_as_the_unit_they_name(
    dialog: str, resolved: str
) -> None:
    assert resolved in dialog


async def test_explicit_dates_are_never_resolved_again_and_idioms_get_none(dialog: str) -> None:
    # Before: "ships Tuesday (9 May 2023) 2026-03-17", the weekday beside a written date
    # resolved against the message's time and printed next to it.
    assert "Tuesday 2026-03-17" in dialog
    assert "Monday, 16 March 2026" in dialog
    assert "Tuesday (" not in dialog and "Monday (" not in dialog
    [idiom] = [line for line in dialog.splitlines() if "feels like" in line]
    assert "yesterday (" not in idiom  # "it feels like yesterday" names no day


@pytest.mark.parametrize("shape", ["timestamps", "date headers"])
async def test_observations_are_dated_by_the_day_each_message_was_written(
    tmp_path: Path, shape: str
) -> None:
    # Before: a transcript whose messages carry their day in a header (and the import's
    # time as their timestamp) had every observation under one heading, the import day.
    path = DATA / "dialog.jsonl" if shape == "timestamps" else with_headers(tmp_path)
    observations = await observe(path)
    days = {o.observed_at[:10] for o in observations}
    assert days == {"2023-05-08", "2023-07-20", "2023-10-02"}
    oscar = next(o for o in observations if "Oscar" in o.text)
    assert oscar.observed_at.startswith("2023-07-20")
    rendered = render_observational_memory([], observations)
    assert "### 2023-05-08" in rendered and "### 2023-10-02" in rendered


async def test_a_reply_keeps_its_subject_and_captions_stay_balanced(dialog: str) -> None:
    # Before: "Yep! It was loud..." lost what it answered (the question, naming nothing,
    # was dropped), and a caption holding a sentence end was split open.
    [reply] = [line for line in dialog.splitlines() if "danced" in line]
    assert "concert" in reply and reply.startswith("Melanie: ")
    for line in dialog.splitlines():
        assert line.count("[") == line.count("]"), line
    assert "[photo: a dog on a beach. He is called Biscuit]" in dialog


@pytest.fixture
async def coding() -> list[Observation]:
    return await observe(DATA / "coding_pi.jsonl")


async def test_a_listing_is_summarised_by_count_and_kind(coding: list[Observation]) -> None:
    # Before: the recent window and the reflections were `.git/objects/...` paths.
    text = memory_of(coding)
    assert ".git/objects/" not in text
    assert "listed 65 paths (60 under .git/objects" in text
    for line in render_observational_memory([], coding).splitlines():
        assert not re.fullmatch(r"[-\s]*(\[\w+\]\s*)?[\w./-]+", line), line


async def test_errors_keep_their_type_message_and_place(coding: list[Observation]) -> None:
    # Before: a failing result became "[tool error] (+42 lines)", its message dropped.
    text = memory_of(coding)
    assert (
        "Tool error: exit 2; ModuleNotFoundError: No module named 'fibo' at "
        "/home/ana/fibapp/test_fib.py line 3"
    ) in text
    assert "exit 128; fatal: could not read Username for 'https://github.com'" in text
    openai = await observe(DATA / "coding_openai.jsonl")
    [found] = [o for o in openai if o.text.startswith("Tool error")]
    assert "OperationalError: (psycopg.OperationalError) connection refused" in found.text
    assert "sqlalchemy/engine/base.py line 145" in found.text and found.priority == "high"


async def test_a_successful_read_is_no_error(coding: list[Observation]) -> None:
    # Before: "Tool error: ValueError: if n is negative." for a file whose docstring says
    # "Raises: ValueError: ...".
    text = memory_of(coding)
    assert "Tool result: read 19 lines of fib.py" in text
    assert "ValueError: if n is negative" not in text
    openai = memory_of(await observe(DATA / "coding_openai.jsonl"))
    assert "read 6 lines of config/settings.toml" in openai


async def test_commands_code_and_paths_are_kept_verbatim(coding: list[Observation]) -> None:
    # Before: `git add .` -> "Git add ;", Python as "Def fibonacci ... Return ...".
    text = memory_of(coding)
    for command in (
        "`git status`",
        "`find . -type f`",
        "`from fib import fibonacci`",
        '`git add . && git commit -m "fix: import fib"`',
        "`fibonacci(n)`",
    ):
        assert command in text
    assert "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):" in text
    assert "fib.py defines" in text  # a file name opening a sentence keeps its case
    openai = memory_of(await observe(DATA / "coding_openai.jsonl"))
    assert "`alembic upgrade head`" in openai


async def test_tool_calls_and_results_are_one_line_notes(coding: list[Observation]) -> None:
    text = memory_of(coding)
    assert "Assistant called read on fib.py" in text
    assert "Assistant called bash: `git diff`" in text
    assert "Tool result: diff of 1 files (+1 -1 lines): test_fib.py" in text
    assert "Tool result: 2 passed" in text
    # The same command run before and after the fix is two events, not one.
    assert text.count("called bash: `python -m pytest -q test_fib.py`") == 2
    openai = memory_of(await observe(DATA / "coding_openai.jsonl"))
    assert 'Assistant called grep for "TODO" in src' in openai
    assert "Assistant: Two TODOs" in openai  # "Two TODOs:" is no speaker's name


async def test_repeated_lines_collapse_and_tool_output_is_no_user_statement(
    coding: list[Observation],
) -> None:
    text = memory_of(coding)
    # Before: the same debugger line kept 33 times.
    assert text.count("cache miss for n=30") == 1 and "(33 times)" in text
    # Before: pi's shell runs (user messages "$ cmd" + output) were high-priority user
    # statements.
    for obs in coding:
        if "fatal:" in obs.text or "4f2a9c1" in obs.text:
            assert obs.text.startswith("User ran `") and obs.priority != "high"
        if obs.text.startswith("User:"):
            assert "On branch" not in obs.text and "fatal" not in obs.text


def test_distinct_facts_in_similar_messages_are_never_merged() -> None:
    # Before: two messages sharing most of their words were taken for one (a content-word
    # overlap of 80%), and the second's fact was in no observation.
    base = (
        "Quick update from facilities about the storage lockers on the third floor of the "
        "main building next to the kitchen and the printer room: locker {n} now opens with "
        "the code word {w}, and the old badge readers stay switched off until the new ones "
        "arrive from the supplier."
    )
    entries = [
        ParsedEntry(f"m{n}", "user", "2026-03-02T09:00:00Z", base.format(n=n, w=w))
        for n, w in ((118, "amber-fox"), (119, "amber-owl"), (120, "slate-fox"))
    ]
    found = extract_observations(entries)
    # Each fact is stated by an observation citing its own message (what the messages
    # share word for word is said once, in the first).
    for n, word in ((118, "amber-fox"), (119, "amber-owl"), (120, "slate-fox")):
        assert any(
            f"locker {n} " in f["text"] and word in f["text"] and f"m{n}" in f["sourceEntryIds"]
            for f in found
        )
    assert sum(f["text"].count("badge readers") for f in found) == 1


def test_a_command_line_is_verbatim_and_a_sentence_about_a_tool_is_prose() -> None:
    found = extract_observations(
        [
            ParsedEntry("m1", "user", "2026-03-02T09:00:00Z", "git add ."),
            ParsedEntry("m2", "assistant", "2026-03-02T09:00:05Z", "Staged both test files."),
            ParsedEntry("m3", "user", "2026-03-02T09:01:00Z", "python is great for the reports"),
        ]
    )
    texts = [f["text"] for f in found]
    assert texts[0] == "User: `git add .`"  # before: "User: Git add ;."
    assert "`" not in texts[-1] and "Python" in texts[-1] and "reports" in texts[-1]
    # The placeholder a verbatim span is held by while the prose is shortened has digits;
    # they are no number of the sentence (a number makes a statement high priority).
    assert found[0].get("priority", "medium") == "medium"
    [year] = extract_observations(
        [ParsedEntry("m1", "user", "2023-05-08T13:56:00Z", "Last year I ran my first marathon.")]
    )
    assert "(2022)" in year["text"] and year["priority"] == "high"


def test_output_of_numbers_is_no_listing() -> None:
    numbers = "\n".join(str(n * n) for n in range(1, 9))
    assert "listed" not in summarize_tool_result(numbers)[0]
    paths = "\n".join(f"src/pkg/module_{n}.py" for n in range(9))
    assert summarize_tool_result(paths)[0] == "Tool result: listed 9 paths (9 .py files)"
