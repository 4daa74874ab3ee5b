"""The offline baseline (issue 18 item 2): what the deterministic observer and reflector keep."""

from __future__ import annotations

import json
from pathlib import Path

from prism_om.eval import run_eval
from prism_om.workers.offline import extract_observations, group_reflections
from prism_om.workers.offline_dates import message_moment, resolve_dates
from prism_om.workers.offline_observe import summarize_tool_result
from prism_om.workers.transcript import ParsedEntry, ParsedObservation

T = "2023-05-08T13:56:00.000Z"  # a Monday
LOCOMO = Path(__file__).parents[1] / "data" / "eval" / "locomo_synthetic.json"


def entry(n: int, role: str, text: str, when: str = T) -> ParsedEntry:
    return ParsedEntry(f"e{n}", role, when, text)


def texts(found: list[dict[str, object]]) -> list[str]:
    return [str(f["text"]) for f in found]


def test_chatter_is_dropped_at_observation_time() -> None:
    chatter = [
        "Hey Melanie! How's it going?",
        "Thanks, Caroline! Talk soon.",
        "Wow, that's amazing!",
        "Ok, got it.",
        "Haha, that sounds like a lot of fun.",
        "[aborted] Request was aborted",
        "Bye! Take care.",
    ]
    found = extract_observations([entry(n, "user", t) for n, t in enumerate(chatter)])
    assert found == []


def test_priority_comes_from_content_never_from_role() -> None:
    fact = "I moved the launch to Friday 14 June."
    remark = "The new office has a nice view over the river park."
    for role in ("user", "assistant"):
        [high] = extract_observations([entry(1, role, fact)])
        [medium] = extract_observations([entry(2, role, remark)])
        assert high["priority"] == "high"
        assert "priority" not in medium  # medium is the default
    [question] = extract_observations([entry(3, "assistant", "How old is Biscuit?")])
    assert question["priority"] == "low" and "asked" in question["text"]
    assert extract_observations([entry(4, "user", "Who are you going with?")]) == []


def test_a_message_is_one_observation_and_duplicates_collapse() -> None:
    message = (
        "Caroline: Oh wow! I adopted a puppy yesterday. His name is Biscuit. He is 10 weeks old."
    )
    [one] = extract_observations([entry(1, "user", message)])
    assert one["text"].startswith("Caroline: ")
    assert "Biscuit" in one["text"] and "10 weeks" in one["text"]
    assert "wow" not in one["text"].lower()
    assert one["sourceEntryIds"] == ["e1"] and one["priority"] == "high"
    twice = extract_observations(
        [
            entry(1, "user", "Ana: The budget for the trip is 2,000 euros."),
            entry(2, "assistant", "Ben: So what else is new?"),
            entry(3, "user", "Ana: The trip budget is 2,000 euros."),
        ]
    )
    assert len(twice) == 1 and twice[0]["sourceEntryIds"] == ["e1", "e3"]


def test_dates_resolve_against_the_message_and_its_header() -> None:
    [adopted] = extract_observations([entry(1, "user", "I adopted a cat yesterday.")])
    assert "yesterday (7 May 2023)" in adopted["text"]
    assert adopted["referencedDate"] == "2023-05-07"
    header = "[8:56 pm on 20 July, 2023] I started a pottery class last Friday."
    [started] = extract_observations([entry(2, "user", header)])
    assert started["referencedDate"] == "2023-07-14"
    assert "[8:56" not in started["text"]
    text, moment = message_moment(header, T)
    assert moment is not None and moment.date().isoformat() == "2023-07-20"
    assert not text.startswith("[")
    monday = message_moment("x", T)[1]
    written = resolve_dates("We start on 22 May and met on 3 March, 2022.", monday)
    assert written.text == "We start on 22 May and met on 3 March, 2022."  # stated already
    assert written.referenced == "2023-05-22"
    assert resolve_dates("I swim every Tuesday.", monday).referenced is None
    assert resolve_dates("I went there on Saturday.", monday).referenced == "2023-05-06"
    assert resolve_dates("We meet on Saturday.", monday).referenced == "2023-05-13"


def test_tool_calls_and_results_are_summarised_not_copied() -> None:
    arguments = {"path": "billing/export.py", "content": "x" * 500}
    call = f"read({json.dumps(arguments, separators=(',', ':'), sort_keys=True)})"
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/billing/export.py", line 41, in render_row\n'
        '    amount = format_money(row["amount"], row["currency"])\n'
        "KeyError: 'currency'"
    )
    found = extract_observations(
        [
            entry(1, "assistant", call),
            entry(2, "tool", trace),
            entry(3, "tool", "........\n24 passed in 3.12s"),
        ]
    )
    assert texts(found) == [
        "Assistant called read on billing/export.py",
        "Tool error: KeyError: 'currency' at /srv/app/billing/export.py line 41",
        "Tool result: 24 passed",
    ]
    assert [f.get("priority", "medium") for f in found] == ["low", "high", "medium"]
    assert "xxxx" not in json.dumps(found)
    assert summarize_tool_result("one\ntwo\nthree") == ("Tool result: one (+2 lines)", "low")


def obs(n: int, day: str, text: str, priority: str = "medium") -> ParsedObservation:
    return ParsedObservation(f"{n:012x}", f"{day}T10:00:00.000Z", priority, text)


def test_reflections_group_by_day_and_subject_and_state_the_facts() -> None:
    found = group_reflections(
        [
            obs(
                1,
                "2023-05-08",
                "Caroline: adopted puppy yesterday (7 May 2023); name Biscuit.",
                "high",
            ),
            obs(2, "2023-05-08", "Melanie: started pottery class at Elm Street studio.", "high"),
            obs(3, "2023-05-08", "Caroline: asked How old Mochi.", "low"),
            obs(
                4,
                "2023-05-09",
                "Caroline: adopted puppy yesterday (7 May 2023); name Biscuit.",
                "high",
            ),
            obs(5, "2023-05-09", "Assistant: [aborted] Request was aborted", "medium"),
            obs(6, "2023-05-09", "Assistant: [aborted] Request was aborted", "medium"),
        ]
    )
    first, second = found
    assert first["text"].startswith("8 May 2023: Caroline — ")
    assert "Biscuit" in first["text"] and "(7 May 2023)" in first["text"]
    assert "Melanie — " in first["text"] and "pottery" in first["text"]
    assert "Mochi" not in first["text"]  # a question is cited, not restated
    assert first["observationIds"] == [f"{n:012x}" for n in (1, 2, 3)]
    assert first["priority"] == "high"
    assert second["text"].count("aborted") <= 1
    assert set(second["observationIds"]) == {f"{n:012x}" for n in (4, 5, 6)}


async def test_the_frozen_conversations_compress_and_keep_their_answers() -> None:
    # Before this baseline the same run gave 2.11x the transcript's tokens and 45% of the
    # evidence turns cited by active observations (docs/eval-offline-baseline.md).
    # Issue 18's targets at the default settings: at most half the transcript's tokens,
    # at least 85% of the answers' key words kept (0.46x and 93.7% when written).
    # Forced after each session (the figures' own setting): every message observed.
    summary = await run_eval(LOCOMO, observe="per-session", force=True)
    overall = summary["overall"]
    assert overall["memoryRatio"] <= 0.5
    assert overall["keywordsInMemory"]["rate"] >= 0.85
    assert overall["evidenceCoverage"]["rate"] == 1.0
    # With the rendered memory capped at a fifth of each transcript (the dropper then
    # retires down to half of that cap), memory stays under the cap and the dropper
    # retires memory of both speakers alike.
    capped = await run_eval(LOCOMO, pool_ratio=0.2, observe="per-session", force=True)
    assert capped["overall"]["memoryRatio"] <= 0.2
    assert capped["overall"]["maxDropShareRatio"] <= 1.2


def test_a_speaker_name_opens_several_messages_a_label_does_not() -> None:
    found = extract_observations(
        [
            entry(1, "user", "Ana: I moved to Porto in 2021."),
            entry(2, "assistant", "Fixed: the export now defaults to EUR in all 24 tests."),
            entry(3, "user", "Ana: My sister Rita lives in Lisbon."),
        ]
    )
    # The assistant's statement in between ends Ana's first observation: an observation
    # never spans an exchange, so revoking one message withholds only what it said.
    assert [str(f["text"]).split(":")[0] for f in found] == ["Ana", "Assistant", "Ana"]
    assert "Fixed" in str(found[1]["text"])
    assert [len(f["sourceEntryIds"]) for f in found] == [1, 1, 1]
