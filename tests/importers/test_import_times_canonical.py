"""Review of issue 18 item 1: imported times are canonical UTC, placeholders are not times,
and the note and errors say exactly what happened."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from prism_om.core.timestamps import utc_timestamp
from prism_om.errors import ImportTimeError, InvalidInputError
from prism_om.importers import import_conversation, parse_conversation
from prism_om.stores import SessionStore


def write_array(tmp_path: Path, name: str, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def chat(*times: dict[str, Any]) -> list[dict[str, Any]]:
    """One message per mapping of time fields."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}", **fields}
        for i, fields in enumerate(times)
    ]


def stamps(path: Path, **kwargs: Any) -> list[str]:
    return [e.timestamp for e in parse_conversation(path, **kwargs).entries]


# -- item 1: epoch placeholders are never dates ----------------------------------------------


@pytest.mark.parametrize("value", [0, 1.5, -3600, "000000000", 946684799, 946684799999])
def test_an_epoch_value_before_2000_is_no_time_and_the_note_says_so(
    tmp_path: Path, value: object
) -> None:
    path = write_array(
        tmp_path, "zero.json", chat({"time": "2024-05-01T10:00:00Z"}, {"time": value}, {})
    )
    plan = parse_conversation(path)
    assert [e.timestamp for e in plan.entries] == [
        "2024-05-01T10:00:00.000Z",
        "2024-05-01T10:00:01.000Z",  # dated like a message without a time
        "2024-05-01T10:00:02.000Z",
    ]
    assert (plan.times.own, plan.times.filled, plan.times.ignored) == (1, 2, 1)
    described = plan.times.describe()
    assert described is not None
    assert f"1 epoch time(s) before 2000 (first at index 1, time {value!r})" in described


def test_a_file_of_zero_times_is_dated_back_from_the_import_time(tmp_path: Path) -> None:
    path = write_array(tmp_path, "zeros.json", chat({"time": 0}, {"time": 0}))
    plan = parse_conversation(path)
    assert all(not e.timestamp.startswith(("1969", "1970")) for e in plan.entries)
    assert plan.times.from_import_time == 2 and plan.times.ignored == 2


def test_an_explicit_iso_date_of_1970_is_kept(tmp_path: Path) -> None:
    path = write_array(tmp_path, "old.json", chat({"time": "1970-01-02T00:00:00Z"}))
    assert stamps(path) == ["1970-01-02T00:00:00.000Z"]


# -- items 2 and 3: one canonical UTC form -----------------------------------------------------


@pytest.mark.parametrize(
    "written",
    [
        "2024-05-01T12:00:00+02:00",
        "2024-05-01T10:00:00Z",
        "20240501T100000Z",
        "2024-W18-3T12:00+02:00",
        "2024-05-01T10:00:00 +00:00",
        "2024-05-01T12:00:00+0200",
        "2024-05-01T10:00:00.000000000Z",
        "  2024-05-01T10:00:00Z  ",
        "2024-05-01 10:00:00",
    ],
)
def test_every_accepted_iso_form_is_stored_as_canonical_utc(tmp_path: Path, written: str) -> None:
    path = write_array(tmp_path, "iso.json", chat({"timestamp": written}))
    (stamp,) = stamps(path)
    assert stamp == "2024-05-01T10:00:00.000Z"
    assert stamp == utc_timestamp(stamp)  # the stores' own fixed-width form


async def test_mixed_zones_are_stored_in_time_order(store: SessionStore, tmp_path: Path) -> None:
    records = chat(
        {"timestamp": "2024-05-01T10:00:00+02:00"},  # 08:00 UTC
        {"timestamp": "2024-05-01T09:00:00Z"},
        {"timestamp": "2024-05-01T06:00:00-05:00"},  # 11:00 UTC
    )
    await import_conversation(store, write_array(tmp_path, "zones.json", records), session_id="z")
    entries = await store.list("z")
    written = [e.timestamp for e in entries]
    assert written == [
        "2024-05-01T08:00:00.000Z",
        "2024-05-01T09:00:00.000Z",
        "2024-05-01T11:00:00.000Z",
    ]
    assert written == sorted(written)
    (summary,) = await store.session_summaries()
    assert summary.last_activity == "2024-05-01T11:00:00.000Z"


def test_a_string_fromisoformat_refuses_is_refused(tmp_path: Path) -> None:
    path = write_array(tmp_path, "bad.json", chat({"timestamp": "2024/05/01 10:00"}))
    with pytest.raises(ImportTimeError, match=r"index 0: timestamp '2024/05/01 10:00' is not ISO"):
        parse_conversation(path)


# -- item 6: the note is accurate ------------------------------------------------------------


def test_first_and_last_are_by_time_when_own_times_go_backwards(tmp_path: Path) -> None:
    records = chat(
        {"time": "2024-05-01T12:00:00Z"},
        {},
        {"time": "2024-05-01T10:00:00Z"},
        {},
    )
    plan = parse_conversation(write_array(tmp_path, "back.json", records))
    assert [e.timestamp for e in plan.entries] == [
        "2024-05-01T12:00:00.000Z",
        "2024-05-01T12:00:01.000Z",  # the next own time is earlier: the full step
        "2024-05-01T10:00:00.000Z",
        "2024-05-01T10:00:01.000Z",
    ]
    assert (plan.times.first, plan.times.last) == (
        "2024-05-01T10:00:01.000Z",
        "2024-05-01T12:00:01.000Z",
    )


def test_the_note_counts_each_source_of_a_mixed_file(tmp_path: Path) -> None:
    records = chat({}, {}, {"time": "2024-05-01T10:00:00Z"}, {}, {}, {})
    plan = parse_conversation(
        write_array(tmp_path, "mixed.json", records), start_time="2024-05-01T09:00:00Z"
    )
    times = plan.times
    assert (times.own, times.from_start, times.from_neighbours, times.from_import_time) == (
        1,
        2,
        3,
        0,
    )
    described = times.describe()
    assert described is not None
    assert described.startswith("5 of 6 messages carry no time: 2 dated from the start time, 3 ")


def test_an_unused_start_time_is_said(tmp_path: Path) -> None:
    records = chat({"time": "2024-05-01T10:00:00Z"}, {})
    plan = parse_conversation(
        write_array(tmp_path, "own.json", records), start_time="2024-01-01T00:00:00Z"
    )
    assert plan.times.start_time_unused
    assert plan.entries[0].timestamp == "2024-05-01T10:00:00.000Z"
    described = plan.times.describe()
    assert described is not None and "the start time was not used" in described
    # Every message dated: nothing was filled, but the unused start time is still said.
    dated = chat({"time": "2024-05-01T10:00:00Z"})
    plan = parse_conversation(
        write_array(tmp_path, "dated.json", dated), start_time="2024-01-01T00:00:00Z"
    )
    assert plan.times.filled == 0 and "not used" in (plan.times.describe() or "")


# -- item 7: out-of-range errors name their cause ----------------------------------------------


def test_an_own_time_at_the_calendar_end_is_named(tmp_path: Path) -> None:
    records = chat({}, {"created_at": "9999-12-31T23:59:59Z"}, {})
    with pytest.raises(InvalidInputError, match=r"from the time at index 1 dates messages outside"):
        parse_conversation(write_array(tmp_path, "end.json", records))


def test_a_start_time_at_the_calendar_end_is_named(tmp_path: Path) -> None:
    path = write_array(tmp_path, "plain.json", chat({}, {}))
    with pytest.raises(InvalidInputError, match=r"from the start time 9999-12-31T23:59:59"):
        parse_conversation(path, start_time="9999-12-31T23:59:59Z")


def test_an_own_time_outside_utc_names_its_field(tmp_path: Path) -> None:
    path = write_array(tmp_path, "edge.json", chat({"time": "0001-01-01T00:00:00+02:00"}))
    with pytest.raises(ImportTimeError, match=r"index 0: time '0001-01-01T00:00:00\+02:00' is out"):
        parse_conversation(path)


# -- item 8: pi notes count entries ------------------------------------------------------------


def test_a_pi_note_counts_entries_not_messages(tmp_path: Path) -> None:
    records = [
        {"type": "session", "version": 3, "id": "s"},
        {"type": "message", "id": "a", "parentId": None, "message": {"role": "user"}},
        {"type": "model_change", "id": "b", "parentId": "a", "provider": "p", "modelId": "m"},
    ]
    path = tmp_path / "pi.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    described = parse_conversation(path).times.describe()
    assert described is not None and described.startswith("3 of 3 entries carry no time")


# -- item 9: units, empty strings, spaces ------------------------------------------------------


def test_a_microsecond_epoch_gets_a_unit_hint(tmp_path: Path) -> None:
    path = write_array(tmp_path, "us.json", chat({"time": 1714557600000000}))
    with pytest.raises(ImportTimeError, match=r"out of range; 16 digits look like micro"):
        parse_conversation(path)


def test_an_empty_time_field_counts_as_absent(tmp_path: Path) -> None:
    records = chat({"timestamp": "", "created_at": "2024-05-01T10:00:00Z"}, {"timestamp": "  "})
    assert stamps(write_array(tmp_path, "empty.json", records)) == [
        "2024-05-01T10:00:00.000Z",
        "2024-05-01T10:00:01.000Z",
    ]


def test_an_epoch_string_with_spaces_is_read(tmp_path: Path) -> None:
    path = write_array(tmp_path, "sp.json", chat({"time": " 1714557600 "}))
    assert stamps(path) == [
        datetime.fromtimestamp(1714557600, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    ]
