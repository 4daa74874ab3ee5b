"""Imports date every message: own times in the usual fields, else a stated fallback,
never the Unix epoch (issue 18, item 1)."""

from __future__ import annotations

import itertools
import json
import pickle
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from prism_om.errors import ImportFormatError, ImportTimeError, InvalidInputError
from prism_om.importers import import_conversation, parse_conversation
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime


def write_jsonl(tmp_path: Path, name: str, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_array(tmp_path: Path, name: str, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def chat(count: int, **times: Any) -> list[dict[str, Any]]:
    """``count`` alternating user/assistant messages; ``times`` maps an index to fields."""
    records = []
    for index in range(count):
        role = "user" if index % 2 == 0 else "assistant"
        record: dict[str, Any] = {"role": role, "content": f"message {index}: we met on Friday."}
        record.update(times.get(f"m{index}", {}))
        records.append(record)
    return records


def moment(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def stamps(path: Path, **kwargs: Any) -> list[str]:
    return [e.timestamp for e in parse_conversation(path, **kwargs).entries]


# -- files without times ---------------------------------------------------------------------


def test_a_file_without_times_is_dated_back_from_the_import_time(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, "plain.jsonl", chat(5))
    before = datetime.now(UTC)
    plan = parse_conversation(path)
    after = datetime.now(UTC)
    times = [moment(e.timestamp) for e in plan.entries]
    assert all(t.year >= 2026 for t in times), times
    # The last message is the import time; the others count back one second each.
    assert before - timedelta(milliseconds=1) <= times[-1] <= after
    assert [b - a for a, b in itertools.pairwise(times)] == [timedelta(seconds=1)] * 4
    report = plan.times
    assert (report.own, report.filled, report.fallback) == (0, 5, "import-time")
    assert (report.first, report.last) == (plan.entries[0].timestamp, plan.entries[-1].timestamp)
    described = report.describe()
    assert described is not None
    assert "5 of 5 messages carry no time" in described and "import time" in described


def test_start_time_and_interval_date_a_file_without_times(tmp_path: Path) -> None:
    path = write_array(tmp_path, "plain.json", chat(4))
    plan = parse_conversation(path, start_time="2023-07-20T20:56:00", interval=90)
    assert [e.timestamp for e in plan.entries] == [
        "2023-07-20T20:56:00.000Z",
        "2023-07-20T20:57:30.000Z",
        "2023-07-20T20:59:00.000Z",
        "2023-07-20T21:00:30.000Z",
    ]
    assert plan.times.fallback == "start-time"
    described = plan.times.describe()
    assert described is not None and "4 dated from the start time; 90 s apart" in described
    # A datetime with its own offset is honoured (rewritten as UTC).
    aware = datetime.fromisoformat("2023-07-21T00:56:00+02:00")
    assert stamps(path, start_time=aware)[0] == "2023-07-20T22:56:00.000Z"


def test_a_file_with_every_time_reports_no_fallback(tmp_path: Path) -> None:
    records = chat(3, m0={"time": 1689886560}, m1={"time": 1689886561}, m2={"time": 1689886562})
    plan = parse_conversation(write_jsonl(tmp_path, "dated.jsonl", records))
    assert plan.times.fallback == "none" and plan.times.describe() is None
    assert (plan.times.own, plan.times.filled, plan.times.first) == (3, 0, None)


# -- the time fields and their formats -------------------------------------------------------


def test_every_usual_field_and_format_is_read(tmp_path: Path) -> None:
    records = chat(
        7,
        m0={"timestamp": "2023-07-20T20:56:00Z"},
        m1={"created_at": "2023-07-20T20:57:00+02:00"},
        m2={"created": 1689886680},  # epoch seconds
        m3={"time": 1689886740123},  # epoch milliseconds, told apart by magnitude
        m4={"time": "1689886800"},  # epoch seconds written as a string
        m5={"time": "1689886860500"},  # milliseconds as a string
        m6={"time": "2023-07-20 21:02:00"},  # naive ISO: UTC
    )
    assert stamps(write_jsonl(tmp_path, "fields.jsonl", records)) == [
        "2023-07-20T20:56:00.000Z",
        "2023-07-20T18:57:00.000Z",  # every time is stored as UTC
        "2023-07-20T20:58:00.000Z",
        "2023-07-20T20:59:00.123Z",
        "2023-07-20T21:00:00.000Z",
        "2023-07-20T21:01:00.500Z",
        "2023-07-20T21:02:00.000Z",
    ]


def test_the_first_field_present_wins(tmp_path: Path) -> None:
    records = chat(1, m0={"created": 0, "timestamp": "2024-01-01T00:00:00Z", "time": "bad"})
    assert stamps(write_jsonl(tmp_path, "order.jsonl", records)) == ["2024-01-01T00:00:00.000Z"]


# -- some times, some not ----------------------------------------------------------------


def test_gaps_fill_forward_and_leading_records_count_back(tmp_path: Path) -> None:
    records = chat(
        8,
        m2={"timestamp": "2024-03-01T10:00:00Z"},
        m5={"timestamp": "2024-03-01T10:00:01Z"},  # too close for two 1 s steps
    )
    plan = parse_conversation(write_jsonl(tmp_path, "mixed.jsonl", records))
    assert [e.timestamp for e in plan.entries] == [
        "2024-03-01T09:59:58.000Z",  # before the first own time: count back from it
        "2024-03-01T09:59:59.000Z",
        "2024-03-01T10:00:00.000Z",
        "2024-03-01T10:00:00.333Z",  # the step shrinks so the gap never passes 10:00:01
        "2024-03-01T10:00:00.666Z",
        "2024-03-01T10:00:01.000Z",
        "2024-03-01T10:00:02.000Z",  # after the last own time: plus one interval each
        "2024-03-01T10:00:03.000Z",
    ]
    times = [moment(e.timestamp) for e in plan.entries]
    assert times == sorted(times)
    assert (plan.times.own, plan.times.filled, plan.times.fallback) == (2, 6, "neighbours")
    described = plan.times.describe()
    assert described is not None and "6 from the nearest dated one before them" in described


def test_start_time_dates_the_records_before_the_first_own_time(tmp_path: Path) -> None:
    records = chat(3, m2={"timestamp": "2024-03-01T10:00:00Z"})
    path = write_jsonl(tmp_path, "lead.jsonl", records)
    assert stamps(path, start_time="2024-03-01T09:00:00Z", interval=60) == [
        "2024-03-01T09:00:00.000Z",
        "2024-03-01T09:01:00.000Z",
        "2024-03-01T10:00:00.000Z",
    ]
    assert parse_conversation(path, start_time="2024-03-01T09:00:00Z").times.fallback == (
        "start-time"
    )
    # A start after the file's own first time would run the dates backwards: refused.
    with pytest.raises(InvalidInputError, match=r"later than the first time in the file.*line 3"):
        parse_conversation(path, start_time="2024-03-02T00:00:00Z")


# -- bad values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("next Tuesday", "is not ISO 8601 or epoch seconds"),
        (True, "must be an ISO 8601 string or epoch number"),
        ({"s": 1}, "must be an ISO 8601 string or epoch number"),
        (1e300, "is out of range"),
    ],
)
def test_a_bad_time_names_the_index_and_field(tmp_path: Path, value: object, reason: str) -> None:
    records = chat(4, m0={"created_at": 1689886560}, m2={"created_at": value})
    path = write_array(tmp_path, "bad.json", records)
    with pytest.raises(ImportTimeError) as caught:
        parse_conversation(path)
    error = caught.value
    assert isinstance(error, ImportFormatError)
    assert (error.field, error.index, error.line) == ("created_at", 2, None)
    assert str(error).startswith(f"{path}: index 2: created_at ")
    assert reason in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.field, copy.index) == (
        ImportTimeError,
        str(error),
        "created_at",
        2,
    )


def test_a_bad_pi_message_time_names_the_line_and_field(tmp_path: Path) -> None:
    records = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2024-01-01T00:00:00Z"},
        {
            "type": "message",
            "id": "a1",
            "parentId": None,
            "message": {"role": "user", "content": "hi", "timestamp": "noon"},
        },
    ]
    with pytest.raises(ImportTimeError, match=r"line 2: message.timestamp 'noon'") as caught:
        parse_conversation(write_jsonl(tmp_path, "pi.jsonl", records))
    assert caught.value.field == "message.timestamp"


def test_a_pi_file_without_times_is_not_dated_1970(tmp_path: Path) -> None:
    records = [
        {"type": "session", "version": 3, "id": "s"},
        {"type": "message", "id": "a1", "parentId": None, "message": {"role": "user"}},
    ]
    plan = parse_conversation(write_jsonl(tmp_path, "pi.jsonl", records))
    assert all(not e.timestamp.startswith("1970") for e in plan.entries)
    assert plan.times.fallback == "import-time"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"start_time": "yesterday"}, "start time 'yesterday' is not an ISO 8601 time"),
        ({"interval": -1}, "interval must not be negative"),
        ({"interval": float("nan")}, "interval must be a finite number"),
    ],
)
async def test_bad_options_are_refused_before_anything_is_written(
    store: SessionStore, tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    path = write_jsonl(tmp_path, "plain.jsonl", chat(2))
    with pytest.raises(InvalidInputError, match=message):
        await import_conversation(store, path, **options)
    assert await store.sessions() == []


# -- end to end: the store and the observer see real dates ------------------------------------


async def test_no_1970_in_entries_last_activity_or_observations(
    store: SessionStore, tmp_path: Path
) -> None:
    records = chat(12)
    for index, record in enumerate(records):
        record["content"] = f"On day {index} Melanie painted 3 pictures and booked the 5pm train."
    path = write_jsonl(tmp_path, "openai.jsonl", records)
    result = await import_conversation(store, path, session_id="chat")
    assert result.times.fallback == "import-time" and result.times.filled == 12
    year = datetime.now(UTC).year
    entries = await store.list("chat")
    assert all(moment(e.timestamp).year >= year - 1 for e in entries)
    (summary,) = await store.session_summaries()
    assert summary.last_activity is not None
    assert moment(summary.last_activity) == moment(entries[-1].timestamp)
    session = Session(store, "chat")
    runtime = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": OfflineMemoryProvider(), "model": "offline"},
    )
    flushed = await runtime.flush(force=True)
    assert flushed.status == "completed" and flushed.observation_ids
    ledger = await store.ledger("chat")
    sources = {e.id: e.timestamp for e in entries}
    for record in ledger.observations:
        observation = record.observation
        assert moment(observation.observed_at).year >= year - 1, observation
        newest = max(moment(sources[s]) for s in observation.source_entry_ids)
        assert moment(observation.observed_at) == newest
        if observation.referenced_date is not None:
            assert not observation.referenced_date.startswith(("1969", "1970"))


def test_an_interval_that_leaves_the_calendar_is_refused(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, "plain.jsonl", chat(3))
    with pytest.raises(InvalidInputError, match="outside the years 1 to 9999"):
        parse_conversation(path, start_time="9999-12-31T00:00:00Z", interval=86400)
    with pytest.raises(InvalidInputError, match="outside the years 1 to 9999"):
        parse_conversation(path, interval=1e15)
