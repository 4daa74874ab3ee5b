"""The charts fragment's geometry: bounded on any branch length, exact where it is exact."""

from __future__ import annotations

from prism_om.entries import SessionEntry, custom_entry, message_entry
from prism_om.inspect.charts import CHART_HEIGHT, MAX_BARS, MAX_POINTS, branch_charts
from prism_om.tokens import get_estimator


def branch(messages: int) -> list[SessionEntry]:
    entries: list[SessionEntry] = []
    parent = None
    for n in range(messages):
        entry = message_entry("s", "user", f"message number {n}", parent_id=parent)
        entries.append(entry)
        parent = entry.id
        if n % 10 == 9:  # an observer pass over the last ten messages
            record = custom_entry(
                "s",
                {
                    "type": "om.observations.recorded",
                    "observations": [
                        {"id": f"{n:012x}", "text": f"fact {n}", "sourceEntryIds": [entry.id]}
                    ],
                },
                parent_id=parent,
            )
            entries.append(record)
            parent = record.id
    return entries


def test_series_stay_bounded_on_a_long_branch() -> None:
    charts = branch_charts(branch(3000), transcript_tokens=12_345)
    assert charts["transcript"]["count"] == 3000
    assert len(charts["transcript"]["points"].split()) == MAX_POINTS
    assert len(charts["pool"]["points"].split()) == MAX_POINTS
    assert len(charts["passes"]["bars"]) == MAX_BARS and charts["passesTotal"] == 300
    # The line ends at the branch's exact token count, on the chart's top edge.
    assert charts["transcript"]["last"] == 12_345
    last_y = float(charts["transcript"]["points"].split()[-1].split(",")[1])
    assert last_y < CHART_HEIGHT / 2


def test_pool_follows_records_and_drops() -> None:
    entries = branch(20)  # two passes: observations ...09 and ...13 (hex of 9 and 19)
    drop = custom_entry(
        "s",
        {"type": "om.observations.dropped", "observationIds": [f"{9:012x}"]},
        parent_id=entries[-1].id,
    )
    charts = branch_charts([*entries, drop], transcript_tokens=100)
    est = get_estimator()
    assert charts["pool"]["max"] == est.count("fact 9") + est.count("fact 19")
    assert charts["pool"]["last"] == est.count("fact 19")
    bars = charts["passes"]["bars"]
    assert [(b["recorded"], b["dropped"]) for b in bars] == [(1, 0), (1, 0), (0, 1)]


def test_an_empty_branch_draws_empty_charts() -> None:
    charts = branch_charts([], transcript_tokens=0)
    assert charts["transcript"]["points"] == "" and charts["passes"]["bars"] == []
