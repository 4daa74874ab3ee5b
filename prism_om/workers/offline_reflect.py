"""The offline reflector: observations grouped by day and subject, their facts stated tersely.

A group is one day (``observedAt``'s date) and one subject: the speaker an observation
leads with (``Caroline: ...``, ``Assistant called ...``, ``Tool error: ...``), else the
shared salient words. Its reflection states the group's facts in telegraphic form
(articles, pronouns and auxiliaries left out, names, numbers and dates kept) after the day
and subject: ``8 May 2023, Caroline: adopted puppy yesterday (7 May 2023); name Biscuit;
10 weeks old``. Questions and routine tool output are cited, not restated; a fact said
twice is stated once, so a repeated line ("[aborted] ...") never fills a reflection. A
group whose facts exceed one reflection's length is split, so no fact is cut off.

Such a reflection says nothing its observations do not, so the render leaves it out while
they are all shown and brings it in once one of them is dropped (:mod:`prism_om.core.render`):
the memory does not carry every fact twice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from typing import Any, Final

from .offline_dates import date_text
from .transcript import ParsedObservation

__all__ = ["group_reflections", "telegraph"]

_MAX_TEXT: Final = 600
_SUBJECT = re.compile(
    r"^(?P<name>[A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30})?)"
    r"(?::| called | ran | error:| result:)"
)
_DROP: Final = frozenset(
    "a an the i i'm i've i'd i'll me my mine myself we we're we've us our you you're your "
    "he she him her his hers it it's its they them their is are was were be been being am "
    "do does did have has had will would shall should can could may might must "
    "just really so very too also actually honestly totally definitely already still "
    "that which who this these those there here of and to at in on for with by from "
    "but so because now though thanks sometime even maybe".split()
)
_RANK: Final = {"low": 0, "medium": 1, "high": 2}
# Words a key phrase leaves out besides the function words: verbs of saying and feeling,
# reactions, vague nouns.
_QUIET: Final = _DROP | frozenset(
    "to for in on at by with from about as but or if then than so not no yes also "
    "want wants wanted need needs needed like likes get gets got going go went come "
    "make made take took say said tell told think feel felt know knew thing things "
    "something kind lot lots much many way time one ones some any every all now "
    "great good nice best better really already still since last next this "
    "learn learning start started starting finish finished try tried taking see saw "
    "give gives gave help helps keep kept put use used let".split()
)


def telegraph(text: str) -> str:
    """``text`` without its function words; sentence ends become ``;``.

    A capitalised function word inside a sentence belongs to a name or title (``The
    Night Circus``, ``May``) and stays.
    """
    kept: list[str] = []
    starts = True
    for token in text.split():
        bare = token.lower().strip(".,!?;:\"'()[]").replace("\u2019", "'")
        inner_capital = token[:1].isupper() and not starts and not bare.startswith("i'")
        ends = token[-1:] in ".!?;"
        if (bare in _DROP and bare != "i" and not inner_capital) or bare == "i":
            if ends and kept:
                kept[-1] = kept[-1].rstrip(".!?;,") + ";"
        else:
            kept.append(token)
        starts = ends
    out = " ".join(kept)
    out = re.sub(r"[.!?]+(?=\s|$)", ";", out)
    out = re.sub(r"\s*;(\s*;)+", ";", out)
    return out.strip(" ;,")


def key_phrase(text: str, seen: set[str]) -> str:
    """A fact's index entry: its first two content words (what it is about), then the
    names, numbers with their unit, and dates it holds; words seen before under the same
    subject and day are left out."""
    found: list[str] = []
    for number, clause in enumerate(telegraph(text).split(";")):
        tokens = clause.replace("(", " (").split()
        topic = 0 if number == 0 else 2
        index = 0
        while index < len(tokens):
            token = tokens[index]
            bare = token.lower().strip(".,!?;:\"'()[]").replace("\u2019", "'")
            if token.startswith("("):
                # A resolved date "(7 May 2023)": keep it whole.
                end = index
                while end < len(tokens) - 1 and not tokens[end].endswith(")"):
                    end += 1
                phrase = " ".join(tokens[index : end + 1]).rstrip(",;")
                index = end + 1
                if phrase not in seen:
                    seen.add(phrase)
                    found.append(phrase)
                continue
            index += 1
            if not bare or bare in _QUIET:
                continue
            keep = token[:1].isupper() or bare[:1].isdigit() or topic < 2
            if bare[:1].isdigit() and index < len(tokens):
                unit = tokens[index].strip(".,!?;:")
                if unit and not unit[:1].isdigit() and unit.lower() not in _QUIET:
                    token, bare, index = f"{token} {unit}", f"{bare} {unit.lower()}", index + 1
            if not keep:
                continue
            topic += 1
            if bare in seen:
                continue
            seen.add(bare)
            found.append(token.strip(".,!?;:\"'[]"))
    return " ".join(found).strip(" ,;")


def _subject(obs: ParsedObservation) -> tuple[str, str]:
    """The subject an observation leads with, and its text without it."""
    match = _SUBJECT.match(obs.text)
    if match is None:
        return "", obs.text
    name = match["name"]
    rest = obs.text[len(name) :]
    return name, (rest[1:] if rest.startswith(":") else rest).strip()


def group_reflections(observations: Sequence[ParsedObservation]) -> list[dict[str, Any]]:
    """The offline reflector's reflections: one per day, split when long.

    A reflection names the day, then each subject (speaker) of the day with the key words
    of what they told: ``8 May 2023: Caroline — graphic designer Northwind, start 22 May;
    Melanie — food bank volunteer two Saturdays month``. Questions and routine output are
    cited by id, not restated; a fact said twice is stated once.
    """
    days: dict[str, list[ParsedObservation]] = {}
    for obs in observations:
        days.setdefault(obs.observed_at[:10], []).append(obs)
    reflections: list[dict[str, Any]] = []
    for day, members in days.items():
        try:
            head = date_text(date.fromisoformat(day))
        except ValueError:
            head = day
        subjects: dict[str, list[tuple[str, ParsedObservation]]] = {}
        minor: list[ParsedObservation] = []
        seen: dict[str, set[str]] = {}
        for obs in members:
            subject, rest = _subject(obs)
            subject = subject or "Notes"
            words = seen.setdefault(subject, set())
            phrase = "" if obs.priority == "low" else key_phrase(rest, words)
            if not phrase:
                minor.append(obs)
                continue
            subjects.setdefault(subject, []).append((phrase, obs))
        reflections.extend(_reflections(head, subjects, minor))
    return reflections


def _reflections(
    head: str,
    subjects: dict[str, list[tuple[str, ParsedObservation]]],
    minor: list[ParsedObservation],
) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []
    parts: list[str] = []
    ids: list[str] = []
    ranks: list[str] = []

    def close() -> None:
        if not parts:
            return
        text = f"{head}: {'; '.join(parts)}"
        if len(text) > _MAX_TEXT:
            text = text[: _MAX_TEXT - 1].rstrip() + "…"
        made.append(
            {
                "text": text,
                "observationIds": list(ids),
                "priority": max(ranks, key=_RANK.__getitem__) if ranks else "low",
            }
        )
        parts.clear()
        ids.clear()
        ranks.clear()

    for subject, facts in subjects.items():
        current: list[str] = []
        for phrase, obs in facts:
            size = len(head) + sum(len(p) + 2 for p in parts) + len(", ".join(current))
            if (parts or current) and size + len(phrase) + len(subject) > _MAX_TEXT - 20:
                if current:
                    parts.append(f"{subject} — {', '.join(current)}")
                    current = []
                close()
            current.append(phrase)
            ids.append(obs.id)
            ranks.append(obs.priority)
        if current:
            parts.append(f"{subject} — {', '.join(current)}")
    # Questions and routine output join the day's last reflection by id only: a
    # reflection of nothing but them would state nothing.
    if parts:
        ids.extend(o.id for o in minor)
        ranks.extend(o.priority for o in minor)
    close()
    return made
