"""The session summary's batch timestamp test (``stores/_summary.py``, issue 16): an
ASCII batch is matched against its shape's template with one translate, no regex walk,
and answers exactly as the regex does."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism_om.stores import _summary
from prism_om.stores._summary import _ALL_ONE_SHAPE, _all_one_shape, latest_timestamp

_SHAPES = ("2026-06-01T12:34:56.789Z", "2026-06-01T12:34:56Z")


class _Counting:
    def __init__(self, pattern: re.Pattern[str], calls: list[str]) -> None:
        self.pattern, self.calls = pattern, calls

    def fullmatch(self, text: str) -> Any:
        self.calls.append(text)
        return self.pattern.fullmatch(text)


def test_a_batch_of_one_shape_walks_no_regex(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    counting = tuple(_Counting(p, calls) for p in _ALL_ONE_SHAPE)
    monkeypatch.setattr(_summary, "_ALL_ONE_SHAPE", counting)
    for shape in _SHAPES:
        stamps = [shape[:17] + f"{n % 60:02d}" + shape[19:] for n in range(100)]
        newest = max(stamps)
        expected = newest if shape.endswith(".789Z") else newest[:-1] + ".000Z"
        assert latest_timestamp(stamps) == expected
    # One regex walk over the whole joined batch (or two) per call before.
    assert calls == []


# Characters that make or break the shapes: digits (ASCII and not), their separators,
# and others.
_chars = st.sampled_from("0123456789-T:.Z\n x٣")


@st.composite
def _near_shapes(draw: st.DrawFn) -> list[str]:
    """Values of a shape with a few characters perhaps changed, or arbitrary text."""
    values = []
    for _ in range(draw(st.integers(1, 5))):
        text = list(draw(st.sampled_from(_SHAPES)))
        for _ in range(draw(st.integers(0, 2))):
            at = draw(st.integers(0, len(text)))
            change = draw(st.sampled_from(["set", "insert", "delete"]))
            if change == "set" and at < len(text):
                text[at] = draw(_chars)
            elif change == "insert":
                text.insert(at, draw(_chars))
            elif text and at < len(text):
                del text[at]
        values.append("".join(text) if draw(st.integers(0, 9)) else draw(st.text(_chars)))
    return values


@settings(max_examples=1000, deadline=None)
@given(values=_near_shapes(), widen=st.integers(0, 1))
def test_the_template_answers_as_the_regex(values: list[str], widen: int) -> None:
    joined = "\n".join(values)
    # A value holding a newline never matches (the regex could split it into two): the
    # caller then answers by parsing each value, as for any other batch.
    expected = (
        _ALL_ONE_SHAPE[widen].fullmatch(joined) is not None
        and joined.count("\n") == len(values) - 1
    )
    assert _all_one_shape(joined, len(values), widen) == expected
