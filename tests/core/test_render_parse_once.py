"""Per-observation work of a turn's memory block (issue 16): observedAt parsed once (it
was four times: twice for the display order and dates, twice for the relevance order),
the text assembled once, visibility tested without a Python frame per source."""

from __future__ import annotations

import sys
from datetime import datetime
from types import FrameType

import pytest

import prism_om.core.relevance as relevance
import prism_om.core.render as render
from prism_om import Observation
from prism_om.core.projection import is_visible_observation
from prism_om.core.render import render_observational_memory_details


def o(n: int, at: str, priority: str = "medium") -> Observation:
    return Observation.model_validate(
        {
            "id": f"{n:012x}",
            "text": f"fact {n}",
            "sourceEntryIds": [f"e{n}"],
            "observedAt": at,
            "priority": priority,
        }
    )


OBSERVATIONS = [
    o(1, "2024-05-02T08:00:00+02:00"),  # 06:00 UTC, but headed by its own date
    o(2, "2024-05-01T23:30:00", "high"),  # naive: read as UTC
    o(3, "2024-05-02T01:00:00-03:00", "low"),
    o(4, "2024-05-01"),
]


def test_observed_at_is_parsed_once_per_observation(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    parse = relevance.instant

    def counting(timestamp: str) -> datetime:
        calls.append(timestamp)
        return parse(timestamp)

    monkeypatch.setattr(render, "instant", counting)
    monkeypatch.setattr(relevance, "instant", counting)
    rendered = render_observational_memory_details([], OBSERVATIONS)
    assert sorted(calls) == sorted(x.observed_at for x in OBSERVATIONS)
    # Dates as written, then instants within a date.
    assert rendered.text.endswith(
        "### 2024-05-01\n- [000000000004] fact 4\n- [000000000002] fact 2\n"
        "### 2024-05-02\n- [000000000003] fact 3\n- [000000000001] fact 1"
    )
    calls.clear()
    # Least relevant omitted first: low, then the older medium, then the newer one.
    capped = render_observational_memory_details([], OBSERVATIONS, max_bytes=200)
    assert capped.omitted_observation_ids == tuple(f"{n:012x}" for n in (3, 4, 1))
    assert len(calls) == len(OBSERVATIONS)


def test_the_text_is_assembled_once_when_it_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    assembled: list[tuple[int, int]] = []
    real = render._Layout.text

    def counting(self: render._Layout, omit_obs: list[int], omit_refl: list[int]) -> str:
        assembled.append((len(omit_obs), len(omit_refl)))
        return real(self, omit_obs, omit_refl)

    monkeypatch.setattr(render._Layout, "text", counting)
    whole = render_observational_memory_details([], OBSERVATIONS)
    assert assembled == [(0, 0)]  # twice before: the fit test, then the result
    assembled.clear()
    capped = render_observational_memory_details([], OBSERVATIONS, max_bytes=200)
    assert len(assembled) == len(set(assembled))  # no candidate assembled twice
    assert capped.text.startswith(whole.text.split("## Observations")[0])


def test_visibility_enters_one_python_frame_per_observation() -> None:
    """is_visible_observation tests the sources at C speed (it ran a generator each)."""
    many = [o(n, "2024-05-01T10:00:00Z") for n in range(1, 201)]
    recent = frozenset({"e1", "e2", "e3"})
    frames: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            frames.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        visible = [x for x in many if is_visible_observation(x, recent)]
    finally:
        sys.setprofile(None)
    assert [x.id for x in visible] == [x.id for x in many[3:]]
    assert frames.count("is_visible_observation") == len(many)
    assert len(frames) <= len(many) + 5  # 3x as many before
