"""Serialising entries and observations into worker prompts, within a byte budget.

Entries are written as a header line and indented text, so a model reads them easily and
code (the offline provider, tests) parses them back exactly::

    [entry e0001 | user | 2024-05-01T09:00:00.000Z]
      We moved the launch to Friday 14 June.

Observations are one line each::

    [obs 0123456789ab | 2024-05-01T09:00:00.000Z | high] User moved the launch to 14 June.

Only lines starting with ``[entry `` or ``[obs `` at column 0 open an item; content lines
are indented by two spaces, so message text can never forge a header.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ..core.records import Observation
from ..core.redaction import Redactor, redacted_entry_text
from ..core.sources import (
    MEMORY_TOOL_NAMES,
    is_eligible_observation_source_entry,
    memory_tool_exchange_ids,
)
from ..entries import SessionEntry
from ..tokens import TokenEstimator, get_estimator

__all__ = [
    "TRUNCATION_MARKER",
    "ObserverBatch",
    "ParsedEntry",
    "ParsedObservation",
    "parse_observation_lines",
    "parse_transcript",
    "select_observer_batch",
    "serialize_entry",
    "serialize_observation",
    "serialize_observations",
    "utf8_len",
]

TRUNCATION_MARKER: Final = "[… truncated {n} bytes]"
_INDENT: Final = "  "
_ENTRY_HEADER = re.compile(
    r"^\[entry (?P<id>.+?) \| (?P<role>user|assistant|tool) \| (?P<time>[^|\]]+)\]$"
)
_OBS_LINE = re.compile(
    r"^\[obs (?P<id>[a-f0-9]{12}) \| (?P<time>[^|\]]+) \| (?P<priority>high|medium|low)\] "
    r"(?P<text>.*)$"
)


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes on a character boundary."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[: max(limit, 0)].decode("utf-8", errors="ignore")


def serialize_entry(
    entry: SessionEntry, redactor: Redactor | None = None, *, max_bytes: int | None = None
) -> str:
    """One message entry as a header and indented text (redacted), ending in a newline.

    With ``max_bytes`` the text is cut, with a marker naming the bytes left out, so the
    whole block fits ``max_bytes`` (never less than the header and marker).
    """
    role = entry.message.role if entry.message is not None else entry.kind
    header = f"[entry {entry.id} | {role} | {entry.timestamp}]\n"
    text = redacted_entry_text(entry, redactor)
    block = header + _indent(text)
    if max_bytes is None or utf8_len(block) <= max_bytes:
        return block
    total = utf8_len(text)
    marker = TRUNCATION_MARKER.format(n=total)
    room = max_bytes - utf8_len(header) - utf8_len(_indent(marker)) - 8
    kept = _cut(text, room)
    marker = TRUNCATION_MARKER.format(n=total - utf8_len(kept))
    return header + _indent(f"{kept}\n{marker}" if kept else marker)


def _without_memory_calls(entry: SessionEntry, memory_calls: set[str]) -> SessionEntry | None:
    """The message as the observer sees it: without calls to the memory tools (their ids
    join ``memory_calls``), None when nothing else is left or it answers such a call."""
    message = entry.message
    if message is None:
        return entry
    if message.role == "tool":
        answers_memory = message.tool_call_id in memory_calls or (
            message.name is not None and message.name in MEMORY_TOOL_NAMES
        )
        return None if answers_memory else entry
    calls = message.tool_calls or []
    ours = [c for c in calls if c.name in MEMORY_TOOL_NAMES]
    if not ours:
        return entry
    memory_calls.update(c.id for c in ours)
    others = [c for c in calls if c.name not in MEMORY_TOOL_NAMES]
    if not others and not message.text().strip():
        return None
    trimmed = message.model_copy(update={"tool_calls": others or None})
    return entry.model_copy(update={"message": trimmed})


def _indent(text: str) -> str:
    lines = text.split("\n") if text else [""]
    return "".join(f"{_INDENT}{line}\n" for line in lines)


@dataclass(frozen=True, slots=True)
class ObserverBatch:
    """What one observer run sees: a prefix of the unscanned entries."""

    scanned: tuple[SessionEntry, ...]
    """Every entry the run covers (sources and bookkeeping), in branch order."""
    sources: tuple[SessionEntry, ...]
    """The eligible message entries shown in the prompt."""
    text: str
    """The serialised sources."""
    truncated: tuple[str, ...] = ()
    """Ids of sources whose text was cut to fit."""

    @property
    def covers_up_to_id(self) -> str | None:
        return self.scanned[-1].id if self.scanned else None


def select_observer_batch(
    entries: Sequence[SessionEntry],
    budget: int,
    redactor: Redactor | None = None,
    *,
    withheld: frozenset[str] = frozenset(),
    max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
) -> ObserverBatch:
    """The longest prefix of ``entries`` whose eligible messages fit ``budget`` bytes and,
    with ``max_tokens``, ``max_tokens`` tokens (counted by ``estimator``).

    Bookkeeping entries (memory records, compactions, other custom entries) join the scan
    without entering the text. A first message larger than the byte budget alone is cut
    with a marker, and one above ``max_tokens`` alone is shown whole, so every batch with a
    message makes progress: coverage never sticks on one. A message whose id is in
    ``withheld`` (revoked) is scanned like bookkeeping: covered, so coverage moves past it,
    and never shown. So are the memory tools' own exchanges (``MEMORY_TOOL_NAMES``: a
    recall call and its answer restate memory): an assistant message is shown without its
    calls to them (and not at all when it holds nothing else), their results never.
    """
    scanned: list[SessionEntry] = []
    sources: list[SessionEntry] = []
    blocks: list[str] = []
    truncated: list[str] = []
    # Tool call id -> where its assistant message sits (sources, scanned): a result is
    # never split from its call, which alone names the tool and its arguments.
    calls: dict[str, tuple[int, int]] = {}
    used = tokens = 0
    est = estimator or get_estimator() if max_tokens is not None else None
    memory_calls: set[str] = set()
    hidden = withheld | memory_tool_exchange_ids(entries)
    for entry in entries:
        if entry.id in hidden or not is_eligible_observation_source_entry(entry):
            scanned.append(entry)
            continue
        shown_entry = _without_memory_calls(entry, memory_calls)
        if shown_entry is None:
            scanned.append(entry)
            continue
        call_id = entry.message.tool_call_id if entry.message is not None else None
        caller = calls.get(call_id) if call_id is not None else None
        if est is not None and max_tokens is not None:
            # The same count that gates observation.message_tokens, so a bulk import is
            # observed in the chunks a live session of it would have been.
            tokens += est.count_entry(entry)
            # A call that opened this chunk keeps its results past the token cap (the pair
            # goes alone); a later one moves to the next chunk with them.
            if sources and tokens > max_tokens and (caller is None or caller[0] > 0):
                _cut_before(caller, scanned, sources, blocks)
                break
        block = serialize_entry(shown_entry, redactor)
        size = utf8_len(block)
        if used + size > budget:
            if sources:
                _cut_before(caller, scanned, sources, blocks)
                break
            block = serialize_entry(shown_entry, redactor, max_bytes=budget)
            size = utf8_len(block)
            truncated.append(entry.id)
            scanned.append(entry)
            sources.append(entry)
            blocks.append(block)
            used += size
            break
        scanned.append(entry)
        sources.append(entry)
        blocks.append(block)
        used += size
        for call in (entry.message.tool_calls if entry.message is not None else None) or ():
            calls[call.id] = (len(sources) - 1, len(scanned) - 1)
    return ObserverBatch(tuple(scanned), tuple(sources), "".join(blocks), tuple(truncated))


def _cut_before(
    caller: tuple[int, int] | None,
    scanned: list[SessionEntry],
    sources: list[SessionEntry],
    blocks: list[str],
) -> None:
    """End the chunk before the assistant message whose tool call the next entry answers,
    unless that message opened the chunk (a pair larger than the cap goes alone)."""
    if caller is None or caller[0] == 0:
        return
    del sources[caller[0] :], blocks[caller[0] :], scanned[caller[1] :]


@dataclass(frozen=True, slots=True)
class ParsedEntry:
    id: str
    role: str
    timestamp: str
    text: str


def parse_transcript(text: str) -> list[ParsedEntry]:
    """The entries serialised by :func:`serialize_entry` inside ``text``, in order."""
    found: list[ParsedEntry] = []
    current: tuple[str, str, str] | None = None
    lines: list[str] = []

    def close() -> None:
        if current is not None:
            found.append(ParsedEntry(*current, text="\n".join(lines)))

    for line in text.split("\n"):
        match = _ENTRY_HEADER.match(line)
        if match:
            close()
            current = (match["id"], match["role"], match["time"].strip())
            lines = []
        elif current is not None and line.startswith(_INDENT):
            lines.append(line[len(_INDENT) :])
        elif current is not None:
            close()
            current = None
            lines = []
    close()
    return found


def serialize_observation(observation: Observation, redactor: Redactor | None = None) -> str:
    """One observation as one line (newlines folded into spaces)."""
    text = " ".join(observation.text.split())
    if redactor:
        text = redactor.text(text)
    return f"[obs {observation.id} | {observation.observed_at} | {observation.priority}] {text}\n"


def serialize_observations(
    observations: Iterable[Observation], redactor: Redactor | None = None
) -> str:
    return "".join(serialize_observation(o, redactor) for o in observations)


@dataclass(frozen=True, slots=True)
class ParsedObservation:
    id: str
    observed_at: str
    priority: str
    text: str


def parse_observation_lines(text: str) -> list[ParsedObservation]:
    """The observations serialised by :func:`serialize_observation` inside ``text``."""
    found: list[ParsedObservation] = []
    for line in text.split("\n"):
        match = _OBS_LINE.match(line)
        if match:
            found.append(
                ParsedObservation(
                    match["id"], match["time"].strip(), match["priority"], match["text"]
                )
            )
    return found
