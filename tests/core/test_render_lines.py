"""Rendered lines carry the id and the text only (issue 18): small per-line overhead."""

from __future__ import annotations

from prism_om import Observation, Reflection, render_observational_memory
from prism_om.tokens import get_estimator


def o(oid: str, text: str, at: str, **extra: str) -> Observation:
    return Observation.model_validate(
        {"id": oid, "text": text, "sourceEntryIds": ["e1"], "observedAt": at, **extra}
    )


def test_a_line_is_id_and_text_under_its_date_heading() -> None:
    text = render_observational_memory(
        [
            Reflection.model_validate(
                {
                    "id": "f" * 12,
                    "text": "Summary.",
                    "observationIds": ["a" * 12],
                    "priority": "high",
                }
            )
        ],
        [
            o(
                "a" * 12,
                "Adopted a cat yesterday (7 May 2023).",
                "2023-05-08T14:05:00Z",
                priority="high",
                referencedDate="2023-05-07",
            ),
            o("b" * 12, "Starts on 22 May.", "2023-05-08T15:00:00Z", referencedDate="2023-05-22"),
            o(
                "c" * 12,
                "Moved the launch.",
                "2023-05-08T16:00:00Z",
                priority="low",
                referencedDate="2023-06-14",
            ),
        ],
    )
    lines = text.splitlines()
    assert "- [ffffffffffff] Summary." in lines
    assert lines[-4:] == [
        "### 2023-05-08",
        "- [aaaaaaaaaaaa] Adopted a cat yesterday (7 May 2023).",
        "- [bbbbbbbbbbbb] Starts on 22 May.",
        "- [cccccccccccc] Moved the launch. (refers to 2023-06-14)",
    ]
    assert "14:05" not in text and "(high)" not in text and "(low)" not in text


def test_the_overhead_per_line_is_the_id() -> None:
    est = get_estimator()
    body = "User chose pgbouncer."
    text = render_observational_memory([], [o("a" * 12, body, "2024-05-01T09:05:00Z")])
    line = text.splitlines()[-1]
    assert est.count(line) - est.count(body) <= 12
