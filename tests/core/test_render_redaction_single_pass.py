"""The memory renderer redacts each item line exactly once: a line equals the core
redactor applied to the unredacted line, for secrets that are pieces of the marker, that
overlap each other, or that hold a newline (continuation lines are indented after)."""

from __future__ import annotations

from prism_om.core.records import Observation, Reflection
from prism_om.core.redaction import Redactor
from prism_om.core.render import render_observational_memory

SECRETS = ["RED", "ACTED]", "e", "brother R", "two\nlines"]


def _observation(text: str) -> Observation:
    return Observation.model_validate(
        {
            "id": "a0a0a0a0a0a0",
            "text": text,
            "sourceEntryIds": ["m1"],
            "observedAt": "2026-11-30T10:05:00+00:00",
            "priority": "high",
        }
    )


def test_observation_and_reflection_lines_are_redacted_once() -> None:
    red = Redactor(SECRETS)
    text = "My brother REDACTED] lives with [REDACTED] the other one."
    # A word of its own, so the reflection does not merely restate its observation.
    summary = f"Summary: {text}"
    reflection = Reflection.model_validate(
        {"id": "b1b1b1b1b1b1", "text": summary, "observationIds": ["a0a0a0a0a0a0"]}
    )
    rendered = render_observational_memory([reflection], [_observation(text)], secrets=red)
    lines = rendered.splitlines()
    assert red.text(f"- [b1b1b1b1b1b1] {summary}") in lines
    assert red.text(f"- [a0a0a0a0a0a0] {text}") in lines
    assert "oth[REDACTED]r" in rendered and "oth[[REDACTED]" not in rendered


def test_a_secret_holding_a_newline_is_redacted_and_continuations_stay_indented() -> None:
    rendered = render_observational_memory(
        [], [_observation("first two\nlines here\nand a last line")], secrets=SECRETS
    )
    assert "two\nlines" not in rendered and "two\n  lines" not in rendered
    assert "\n  and a last lin[REDACTED]" in rendered
