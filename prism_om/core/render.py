"""Render reflections and observations into the prepared memory text an agent reads.

Layout (sections appear only when they have content; no memory renders as ``""``)::

    # Observational memory
    Ids in brackets can be recalled for their exact source messages.

    ## Scope outline
    <outline>

    ## Reflections
    - [aaaaaaaaaaaa] The user is migrating the billing service to Postgres.

    ## Observations
    ### 2024-05-03
    - [bbbbbbbbbbbb] User chose pgbouncer in transaction mode. (refers to 2024-05-07)

    [3 observations omitted to fit the 256 KiB memory cap]

Reflections keep record order. Observations are grouped by the date of ``observedAt`` (as
written, so a local timestamp keeps its local date), dates ascending, and ordered by time
within a date. A line carries the id (recall needs it) and the text, nothing else: the
date heading stands for each line's time, and priority only decides what is omitted
first, so neither is repeated per line (on short observations they cost as many tokens as
the text). A referenced date follows the text unless the text already states that day.

A reflection that restates its observations renders only when they do not: when every
observation it rests on is rendered and every word of it (dates as ``7 May 2023``) is in
those observations or their dates, it would repeat them, so it is left out (still active
and recallable by id). Once one of its observations is dropped or omitted, it renders,
standing for what left. A reflection that says anything more (a model's inference, a
subject or word of its own) always renders.

The text never exceeds its byte cap (256 KiB, or a smaller ``max_bytes``): the least
relevant observations (lowest priority, then oldest) are omitted first, then, only if the
reflections alone are too large, the least relevant reflections; a final line says how
many were omitted. Every line is redacted of ``secrets`` before it is measured,
since a replacement can be longer than the secret.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Final

from .limits import RENDERED_MEMORY_MAX_BYTES, validate_limit
from .records import PRIORITY_RANK, Observation, Reflection
from .redaction import Redactor, redactor
from .relevance import instant, lowest_relevance_order
from .text_caps import truncate_utf8, utf8_len

__all__ = [
    "MEMORY_TITLE",
    "RenderedMemory",
    "render_observational_memory",
    "render_observational_memory_details",
]

MEMORY_TITLE: Final = "# Observational memory"
_HINT: Final = "Ids in brackets can be recalled for their exact source messages."
_TRUNCATED: Final = "\n[memory truncated to fit its cap]"


@dataclass(frozen=True)
class RenderedMemory:
    """Rendered memory text and which memory made it in."""

    text: str
    observation_ids: tuple[str, ...]
    """Rendered observations, in display order."""
    reflection_ids: tuple[str, ...]
    omitted_observation_ids: tuple[str, ...]
    """Observations left out to fit the cap, least relevant first."""
    omitted_reflection_ids: tuple[str, ...]
    truncated: bool = False
    """True only when even the title, outline and marker had to be cut."""
    restating_reflection_ids: tuple[str, ...] = ()
    """Reflections left out because the rendered observations state all they say."""


def render_observational_memory(
    reflections: Sequence[Reflection],
    observations: Sequence[Observation],
    *,
    outline: str | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    max_bytes: int = RENDERED_MEMORY_MAX_BYTES,
) -> str:
    """The memory text for ``reflections`` and ``observations`` (both in record order)."""
    return render_observational_memory_details(
        reflections, observations, outline=outline, secrets=secrets, max_bytes=max_bytes
    ).text


def render_observational_memory_details(
    reflections: Sequence[Reflection],
    observations: Sequence[Observation],
    *,
    outline: str | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    max_bytes: int = RENDERED_MEMORY_MAX_BYTES,
) -> RenderedMemory:
    """Like ``render_observational_memory``, also reporting rendered and omitted ids.

    Raises ``LimitExceededError`` when ``max_bytes`` is above the 256 KiB hard cap.
    """
    validate_limit("max_bytes", max_bytes, hard_cap=RENDERED_MEMORY_MAX_BYTES)
    red = redactor(secrets)
    # Each observedAt parsed once: the display order, the date headings and the
    # relevance order all rest on it.
    instants = [instant(o.observed_at) for o in observations]
    layout = _Layout(reflections, observations, instants, outline, red)
    if layout.empty:
        return RenderedMemory("", (), (), (), ())

    # Omitting one more item never makes the text longer (a line outweighs the digits the
    # omission count may gain), so the smallest omission that fits is a binary search.
    obs_order = lowest_relevance_order(observations, instants)
    refl_order = sorted(
        range(len(reflections)), key=lambda i: (PRIORITY_RANK[reflections[i].priority], i)
    )

    # Each candidate text assembled and measured once: the search's last try is, most of
    # the time (nothing omitted), the text returned.
    sized: dict[tuple[int, int], tuple[str, int]] = {}

    def text_of(n_obs: int, n_refl: int) -> tuple[str, int]:
        if (n_obs, n_refl) not in sized:
            text = layout.text(obs_order[:n_obs], refl_order[:n_refl])
            sized[(n_obs, n_refl)] = (text, utf8_len(text))
        return sized[(n_obs, n_refl)]

    def fits(n_obs: int, n_refl: int) -> bool:
        return text_of(n_obs, n_refl)[1] <= max_bytes

    n_obs = _smallest(len(observations), lambda k: fits(k, 0))
    n_refl = 0
    if n_obs is None:
        n_obs = len(observations)
        n_refl_found = _smallest(len(reflections), lambda k: fits(n_obs, k))
        n_refl = len(reflections) if n_refl_found is None else n_refl_found
    omitted_obs, omitted_refl = obs_order[:n_obs], refl_order[:n_refl]
    text, size = text_of(n_obs, n_refl)
    truncated = size > max_bytes
    if truncated:
        text = truncate_utf8(text, max_bytes, _TRUNCATED)
    gone_obs, gone_refl = set(omitted_obs), set(omitted_refl)
    restating = set(layout.restating(gone_obs)) - gone_refl
    return RenderedMemory(
        text=text,
        observation_ids=tuple(
            observations[i].id for i in layout.observation_display_order if i not in gone_obs
        ),
        reflection_ids=tuple(
            r.id for i, r in enumerate(reflections) if i not in gone_refl and i not in restating
        ),
        omitted_observation_ids=tuple(observations[i].id for i in omitted_obs),
        omitted_reflection_ids=tuple(reflections[i].id for i in omitted_refl),
        truncated=truncated,
        restating_reflection_ids=tuple(reflections[i].id for i in sorted(restating)),
    )


def _smallest(upper: int, ok: Callable[[int], bool]) -> int | None:
    """The smallest ``k`` in ``0..upper`` with ``ok(k)``, assuming monotony; else None."""
    if ok(0):
        return 0
    if not ok(upper):
        return None
    lo, hi = 0, upper  # ok(lo) is False, ok(hi) is True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


class _Layout:
    """Pre-rendered, pre-redacted lines; ``text()`` assembles them minus omitted items."""

    def __init__(
        self,
        reflections: Sequence[Reflection],
        observations: Sequence[Observation],
        instants: Sequence[datetime],
        outline: str | None,
        red: Redactor,
    ) -> None:
        self.empty = not reflections and not observations and not (outline and outline.strip())
        self.head = [MEMORY_TITLE, _HINT]
        if outline and outline.strip():
            self.head += ["", "## Scope outline", red.text(outline.strip())]
        self.reflection_lines = [_reflection_line(r, red) for r in reflections]
        # The date as written: ``instant`` only fills in a missing zone, it never shifts.
        dates = [moment.date().isoformat() for moment in instants]
        # Display order: by date as written, then by instant, then record order.
        self.observation_display_order = sorted(
            range(len(observations)), key=lambda i: (dates[i], instants[i], i)
        )
        self.observation_dates = dates
        self.restating_supports = _restating_supports(
            reflections, observations, self.observation_dates
        )
        self.observation_lines = [_observation_line(o, red) for o in observations]
        self.date_headers = {d: red.text(f"### {d}") for d in set(self.observation_dates)}

    def text(self, omit_obs: Sequence[int], omit_refl: Sequence[int]) -> str:
        gone_obs, gone_refl = set(omit_obs), set(omit_refl)
        lines = list(self.head)
        hidden = gone_refl | set(self.restating(gone_obs))
        kept_refl = [line for i, line in enumerate(self.reflection_lines) if i not in hidden]
        if kept_refl:
            lines += ["", "## Reflections", *kept_refl]
        kept_obs = [i for i in self.observation_display_order if i not in gone_obs]
        if kept_obs:
            lines += ["", "## Observations"]
            current = None
            for i in kept_obs:
                if self.observation_dates[i] != current:
                    current = self.observation_dates[i]
                    lines.append(self.date_headers[current])
                lines.append(self.observation_lines[i])
        if gone_obs or gone_refl:
            lines += ["", _omission_marker(len(gone_obs), len(gone_refl))]
        return "\n".join(lines)

    def restating(self, gone_obs: set[int]) -> list[int]:
        """Reflections that the observations kept in this text restate in full."""
        return [i for i, sup in self.restating_supports.items() if not sup & gone_obs]


_WORDS = re.compile(r"[^\W_]+")


def _restating_supports(
    reflections: Sequence[Reflection], observations: Sequence[Observation], dates: Sequence[str]
) -> dict[int, frozenset[int]]:
    """Reflection index -> its observations' indices, for each reflection that says
    nothing beyond them: its every word is in their texts or their days (``dates``, the
    observations' ISO dates, and referenced dates), written either way.

    One pass over the memory that is rendered anyway: it grows with the memory shown, not
    with the transcript.
    """
    index = {o.id: i for i, o in enumerate(observations)}
    days: dict[str, frozenset[str]] = {}
    found: dict[int, frozenset[int]] = {}
    for r_index, reflection in enumerate(reflections):
        if any(i not in index for i in reflection.observation_ids):
            continue  # resting on an observation not shown: it stands for that one
        supports = frozenset(index[i] for i in reflection.observation_ids)
        # The reflection's words not yet found, checked against one observation at a
        # time: a few set lookups per observation, whatever its length.
        missing = list(_text_words(reflection.text))
        for s in supports:
            text_words = _text_words(observations[s].text)
            day = _day_words(dates[s], days)
            referenced = _day_words(observations[s].referenced_date or "", days)
            missing = [
                w for w in missing if w not in text_words and w not in day and w not in referenced
            ]
            if not missing:
                found[r_index] = supports
                break
        else:
            if not missing:  # a reflection of no words at all states nothing either
                found[r_index] = supports
    return found


@functools.lru_cache(maxsize=8192)
def _text_words(text: str) -> frozenset[str]:
    # Cached: each turn renders mostly the same memory again.
    return frozenset(_WORDS.findall(text.lower()))


def _day_words(iso: str, cache: dict[str, frozenset[str]]) -> frozenset[str]:
    """``2023-05-08`` as every word it may be written with: ``8 08 may 05 2023``."""
    if iso not in cache:
        try:
            day = date.fromisoformat(iso[:10])
        except ValueError:
            cache[iso] = frozenset()
        else:
            month = _MONTHS[day.month - 1]
            cache[iso] = frozenset(
                (str(day.day), f"{day.day:02d}", month, f"{day.month:02d}", str(day.year))
            )
    return cache[iso]


# English names, not the locale's: the offline workers write dates in English.
_MONTHS: Final = (
    "january february march april may june july august september october november december"
).split()


def _omission_marker(n_obs: int, n_refl: int) -> str:
    parts = []
    if n_obs:
        parts.append(f"{n_obs} observation{'s' if n_obs != 1 else ''}")
    if n_refl:
        parts.append(f"{n_refl} reflection{'s' if n_refl != 1 else ''}")
    return f"[{' and '.join(parts)} omitted to fit the memory cap]"


def _block(text: str) -> str:
    # Continuation lines are indented so a multi-line text stays inside its list item.
    return text.replace("\n", "\n  ")


def _item(line: str, red: Redactor) -> str:
    """One list item, redacted exactly once, then indented.

    Once: a second pass would find secrets inside the first pass's markers (a secret
    ``RED`` turns ``[REDACTED]`` into ``[[REDACTED]ACTED]``). The whole line, so a secret
    spanning the id, priority and text is caught; before the indent, so a secret holding
    a newline still matches the text as written.
    """
    return _block(red.text(line.replace("\r\n", "\n")))


def _reflection_line(reflection: Reflection, red: Redactor) -> str:
    return _item(f"- [{reflection.id}] {reflection.text.strip()}", red)


def _observation_line(observation: Observation, red: Redactor) -> str:
    text = observation.text.strip()
    line = f"- [{observation.id}] {text}"
    referenced = observation.referenced_date
    if referenced and not _states_day(text, referenced):
        line += f" (refers to {referenced})"
    return _item(line, red)


def _states_day(text: str, iso: str) -> bool:
    """True when ``text`` already names the day ``iso`` (as ISO or ``7 May 2023``)."""
    if iso in text:
        return True
    try:
        day = datetime.fromisoformat(iso).date()
    except ValueError:
        return False
    # "22 May" in a message of 2023 states the day; the heading gives the year.
    return re.search(rf"\b{day.day} {day:%B}\b", text) is not None
