"""A seeded, realistic-looking dialog whose every user message carries one unique fact.

Benchmarks and tests of "the agent never loses sight of anything" need conversations
shaped like real ones: user messages of 60 to 120 words mixing small talk with dates,
names, numbers and decisions, assistant replies of the same length that restate and add
to them. Each user message holds exactly one fact no other message holds (a person's
locker number and code word), so a test can ask, after any turn, whether that fact is in
the next request (the memory or the raw window) or in neither.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

__all__ = ["DialogTurn", "dialog_turns"]

_PEOPLE: Final = (
    "Dana", "Leo", "Priya", "Jonas", "Mei", "Omar", "Lena", "Kofi", "Ines", "Tomas",
    "Aiko", "Ravi", "Sofia", "Henrik", "Nadia", "Carlos",
)  # fmt: skip
_PLACES: Final = (
    "Lisbon", "the Oslo office", "Nairobi", "the Berlin warehouse", "Montreal", "Osaka",
    "the staging cluster", "Porto", "the Leeds depot", "Valparaiso",
)  # fmt: skip
_PROJECTS: Final = (
    "the billing export", "Atlas 2.4", "the search reindex", "the checkout redesign",
    "migration 0042", "the quarterly report", "the vendor contract", "the gateway rollout",
)  # fmt: skip
_WORDS: Final = (
    "apple", "maple", "orbit", "harbor", "cobalt", "willow", "ember", "quartz", "juniper",
    "falcon", "lantern", "meadow", "saffron", "tundra", "velvet", "zephyr", "cedar", "onyx",
)  # fmt: skip
_OPENERS: Final = (
    "Morning! Quick one before the stand-up, and sorry if this rambles a bit.",
    "Hey, I was going through my notes from yesterday and wanted to share something.",
    "Okay, so I finally got an answer from facilities about the storage question.",
    "Before I forget, here is the thing I mentioned on the call this afternoon.",
    "Good news on the logistics side, although it took far longer than it should have.",
    "I am writing this from the train, so forgive the typos if there are any.",
)
_FILLERS: Final = (
    "The rest of the week looks calm, apart from the usual review meetings.",
    "We also talked about moving the retro to Thursday, but nobody decided anything.",
    "The coffee machine on the third floor is broken again, which explains the mood.",
    "I still owe you the summary of the customer interviews; it is half written.",
    "Nothing urgent otherwise, just keep it somewhere so we do not lose track of it.",
    "If anything changes I will ping you, but I do not expect it to move again.",
    "The budget review was shorter than usual, which everyone seemed happy about.",
    "Let me know if you want me to send the same details to the rest of the team.",
)
_REPLIES: Final = (
    "Thanks, that is really helpful and I have written it down.",
    "Got it, I will keep that in mind for the planning session.",
    "Understood, and thanks for chasing facilities about it.",
    "Noted, that clears up the confusion from last week.",
)
_ADVICE: Final = (
    "It might be worth telling the people who share the floor, since they asked about "
    "storage during the last all-hands and nobody had a clear answer for them.",
    "I would also double-check the access list, because the old badges were not always "
    "removed when people moved desks, and that caused trouble in the spring.",
    "If the schedule slips again we can move the review to the following week without "
    "much cost, as long as the release notes are ready by then.",
    "For the report, I will add a short section on the open risks so that the vendor "
    "contract and the gateway rollout do not surprise anyone at the steering meeting.",
)


@dataclass(frozen=True)
class DialogTurn:
    """One exchange: a user message carrying ``fact``, then the assistant's reply."""

    index: int
    user: str
    assistant: str
    fact: str
    """The unique detail of ``user`` (a code word), to look for in a request."""
    timestamp: str
    """When the user wrote it (ISO 8601, UTC, a few minutes after the turn before)."""


def _code_word(rng: random.Random, index: int) -> str:
    # The index makes it unique; two words make it look like a real passphrase.
    return f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}-{index}"


def _user(rng: random.Random, index: int, when: datetime, fact: str) -> str:
    person = rng.choice(_PEOPLE)
    place = rng.choice(_PLACES)
    project = rng.choice(_PROJECTS)
    locker = 100 + index
    due = when + timedelta(days=rng.randint(2, 40))
    parts = [
        rng.choice(_OPENERS),
        f"{person} moved the spare equipment for {project} into locker {locker} at {place}, "
        f"and the code word to open it is {fact}.",
        f"They need it back before {due:%A} {due.day} {due:%B %Y}, "
        f"when the next round of work on {project} starts.",
        rng.choice(_FILLERS),
    ]
    while len(" ".join(parts).split()) < 60 + rng.randint(0, 40):
        parts.append(rng.choice(_FILLERS))
    return " ".join(parts)


def _assistant(rng: random.Random, index: int) -> str:
    parts = [
        rng.choice(_REPLIES),
        f"So locker {100 + index} is the one to use for now, and I will only share the "
        "code word with people who ask for it directly.",
        rng.choice(_ADVICE),
    ]
    while len(" ".join(parts).split()) < 60 + rng.randint(0, 30):
        parts.append(rng.choice(_ADVICE))
    return " ".join(parts)


def dialog_turns(
    count: int, *, seed: int = 7, start: datetime | None = None
) -> Iterator[DialogTurn]:
    """``count`` turns, the same for the same ``seed``; user messages 60-120 words."""
    rng = random.Random(seed)
    when = start or datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    for index in range(count):
        when += timedelta(minutes=rng.randint(1, 9))
        fact = _code_word(rng, index)
        yield DialogTurn(
            index=index,
            user=_user(rng, index, when, fact),
            assistant=_assistant(rng, index),
            fact=fact,
            timestamp=when.isoformat().replace("+00:00", "Z"),
        )
