"""The offline observer joins what one speaker tells in one go, past the other's questions
only: a statement of the other in between starts a new observation, so revoking one
message never withholds the facts of another turn."""

from __future__ import annotations

from prism_om.workers.offline import extract_observations
from prism_om.workers.transcript import ParsedEntry

T = "2026-11-30T10:00:00.000Z"


def _entries(*messages: tuple[str, str]) -> list[ParsedEntry]:
    return [ParsedEntry(f"e{n}", role, T, text) for n, (role, text) in enumerate(messages)]


def test_a_statement_of_the_other_speaker_ends_the_observation() -> None:
    found = extract_observations(
        _entries(
            ("user", "We moved the billing service to PostgreSQL 16 last Friday."),
            ("assistant", "Billing runs on PostgreSQL 16 since Friday, then."),
            ("user", "Remember that the Lisbon office closes on Thursdays."),
        )
    )
    sources = [f["sourceEntryIds"] for f in found]
    assert sources == [["e0"], ["e1"], ["e2"]]
    assert "Lisbon" not in str(found[0]["text"])


def test_past_a_question_of_the_other_the_speaker_goes_on_in_one_observation() -> None:
    found = extract_observations(
        _entries(
            ("user", "Ana: I moved to Porto in 2021."),
            ("assistant", "Which part of Porto?"),
            ("user", "Ana: Ribeira, close to the river, with my sister Rita."),
        )
    )
    ana = [f for f in found if str(f["text"]).startswith("Ana:")]
    assert len(ana) == 1 and ana[0]["sourceEntryIds"] == ["e0", "e2"]
    assert "Porto" in str(ana[0]["text"]) and "Rita" in str(ana[0]["text"])
