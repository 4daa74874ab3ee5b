"""``OfflineMemoryProvider``: deterministic, extractive memory workers with no model at all.

A baseline that needs no network and no credentials. It reads the worker prompt the
runtime builds (entry headers and observation lines are parseable, see
:mod:`.transcript`) and answers with tool calls:

* observer: one dated observation per substantive statement of the user and assistant
  messages shown, citing the source entry id. Greetings and acknowledgements are skipped,
  and so are questions without content. The statement stays verbatim (names, numbers,
  decisions); relative dates ("tomorrow", "next Friday") and ISO dates in the text become
  ``referencedDate``. Priority: high for user assertions with numbers, dates or decisions,
  medium for other statements, low for questions.
* reflector: groups the observations shown by date and by subject (salient words they
  share) and records one reflection per group over their ids.
* dropper: records nothing; pair it with ``dropper.policy = "lowest-relevance"``.

A real model writes far better memory: it resolves references, merges facts and judges
what matters. Use this where none is available, in tests, demos and offline tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Sequence
from datetime import date, datetime, timedelta
from typing import Any, Final

from ..providers.base import DoneEvent, ProviderEvent, ProviderRequest, ToolCallEvent
from .model import Model
from .tools import RECORD_OBSERVATIONS, RECORD_REFLECTIONS
from .transcript import ParsedEntry, ParsedObservation, parse_observation_lines, parse_transcript

__all__ = ["OFFLINE_MODEL", "OfflineMemoryProvider", "extract_observations", "group_reflections"]

OFFLINE_MODEL: Final = Model(id="prism-om-offline", provider="offline")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_.:/-]*")
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_ACK: Final = frozenset(
    "hi there hello hey thanks thank you ok okay sure great cool got it sounds good yes no "
    "yep nope "
    "alright all right perfect nice awesome bye goodbye morning afternoon evening please "
    "welcome np will do noted understood fine thx ty lol haha wow indeed absolutely exactly "
    "of course that's that is".split()
)
_STOP: Final = frozenset(
    "the a an and or but if then than that this these those there their they them what "
    "which who whom whose when where why how with without from into onto about above below "
    "for of on in at to by is are was were be been being do does did done have has had can "
    "could would should will shall may might must just also very really some any all each "
    "your you our ours my mine me we us it its it's i'm i've i'd i'll let's please think "
    "know like want need make sure okay user assistant asked said".split()
)
_DECISION: Final = frozenset(
    "decide decided decision chose choose chosen agreed agree approve approved plan planned "
    "deadline due must prefer preferred switch switched move moved migrate migrated launch "
    "ship shipping release budget cancel cancelled confirmed confirm commit committed "
    "schedule scheduled always never going".split()
)
_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MAX_TEXT: Final = 400
_PER_CALL: Final = 40
_CALL_BYTES: Final = 24 * 1024
_CALLS_PER_TURN: Final = 8
_MAX_SENTENCES: Final = {"user": 12, "assistant": 4}


def _words(text: str) -> list[str]:
    return [w.lower().strip(".:/'-") for w in _WORD.findall(text)]


def _salient(text: str) -> set[str]:
    return {w for w in _words(text) if len(w) >= 4 and w not in _STOP and not w.isdigit()}


def _is_ack(words: Sequence[str]) -> bool:
    return all(w in _ACK for w in words)


def _has_content(sentence: str) -> bool:
    if any(ch.isdigit() for ch in sentence):
        return True
    if len(_salient(sentence)) >= 2:
        return True
    # A capitalised word past the first one: likely a name.
    tokens = sentence.split()
    return any(t[:1].isupper() for t in tokens[1:])


def _referenced_date(sentence: str, timestamp: str) -> str | None:
    explicit = _ISO_DATE.search(sentence)
    if explicit:
        try:
            return date.fromisoformat(explicit.group(1)).isoformat()
        except ValueError:
            pass
    try:
        day = datetime.fromisoformat(timestamp).date()
    except ValueError:
        return None
    lower = sentence.lower()
    if re.search(r"\b(today|tonight|this morning|this afternoon|this evening)\b", lower):
        return day.isoformat()
    if re.search(r"\btomorrow\b", lower):
        return (day + timedelta(days=1)).isoformat()
    if re.search(r"\byesterday\b", lower):
        return (day - timedelta(days=1)).isoformat()
    if re.search(r"\bnext week\b", lower):
        return (day + timedelta(days=7)).isoformat()
    if re.search(r"\blast week\b", lower):
        return (day - timedelta(days=7)).isoformat()
    for index, name in enumerate(_WEEKDAYS):
        match = re.search(rf"\b(last|next|this|on|by|until)?\s*{name}\b", lower)
        if match:
            delta = (index - day.weekday()) % 7
            if match.group(1) == "last":
                delta = delta - 7 if delta else -7
            elif delta == 0 or (match.group(1) == "next" and delta < 1):
                delta = 7
            return (day + timedelta(days=delta)).isoformat()
    return None


def extract_observations(entries: Sequence[ParsedEntry]) -> list[dict[str, Any]]:
    """The offline observer's observations (tool-argument shape) for the entries shown."""
    found: list[dict[str, Any]] = []
    for entry in entries:
        if entry.role not in _MAX_SENTENCES:
            continue
        kept = 0
        for raw in _SENTENCE_END.split(entry.text):
            sentence = " ".join(raw.split())
            words = _words(sentence)
            if not words or _is_ack(words) or (len(words) < 2 and not _has_content(sentence)):
                continue
            question = sentence.endswith("?")
            if question and not _has_content(sentence):
                continue
            if entry.role == "assistant" and question:
                continue
            if sentence.startswith("[… truncated"):
                continue
            referenced = _referenced_date(sentence, entry.timestamp)
            if entry.role == "user":
                if question:
                    text, priority = f"User asked: {sentence}", "low"
                else:
                    strong = (
                        any(ch.isdigit() for ch in sentence)
                        or referenced is not None
                        or any(w in _DECISION for w in words)
                    )
                    text, priority = f"User: {sentence}", "high" if strong else "medium"
            else:
                text, priority = f"Assistant: {sentence}", "medium"
            if len(text) > _MAX_TEXT:
                text = text[: _MAX_TEXT - 1].rstrip() + "…"
            item: dict[str, Any] = {"text": text, "sourceEntryIds": [entry.id]}
            if priority != "medium":
                item["priority"] = priority
            if referenced is not None:
                item["referencedDate"] = referenced
            found.append(item)
            kept += 1
            if kept >= _MAX_SENTENCES[entry.role]:
                break
    return found


def group_reflections(observations: Sequence[ParsedObservation]) -> list[dict[str, Any]]:
    """The offline reflector's reflections: one per (date, shared-subject) group."""
    by_date: dict[str, list[ParsedObservation]] = {}
    for obs in observations:
        by_date.setdefault(obs.observed_at[:10], []).append(obs)
    reflections: list[dict[str, Any]] = []
    for day, group in by_date.items():
        words = [_salient(o.text) for o in group]
        frequency: dict[str, int] = {}
        for ws in words:
            for w in ws:
                frequency[w] = frequency.get(w, 0) + 1
        parent = list(range(len(group)))

        def find(i: int, parent: list[int] = parent) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        limit = max(2, len(group) // 2)
        first_with: dict[str, int] = {}
        for index, ws in enumerate(words):
            for w in sorted(ws):
                if not 2 <= frequency[w] <= limit:
                    continue
                if w in first_with:
                    parent[find(index)] = find(first_with[w])
                else:
                    first_with[w] = index
        clusters: dict[int, list[int]] = {}
        for index in range(len(group)):
            clusters.setdefault(find(index), []).append(index)
        singles: list[int] = []
        for members in clusters.values():
            if len(members) == 1:
                singles.extend(members)
                continue
            shared: dict[str, int] = {}
            for m in members:
                for w in words[m]:
                    shared[w] = shared.get(w, 0) + 1
            subject = [
                w for w, n in sorted(shared.items(), key=lambda kv: (-kv[1], kv[0])) if n > 1
            ]
            reflections.append(_reflection(day, ", ".join(subject[:3]) or "notes", group, members))
        if singles:
            reflections.append(_reflection(day, "other notes", group, sorted(singles)))
    return reflections


def _reflection(
    day: str, subject: str, group: Sequence[ParsedObservation], members: Sequence[int]
) -> dict[str, Any]:
    body = "; ".join(group[m].text for m in members)
    text = f"{day} — {subject}: {body}"
    if len(text) > 600:
        text = text[:599].rstrip() + "…"
    ranks = {group[m].priority for m in members}
    priority = "high" if "high" in ranks else "medium" if "medium" in ranks else "low"
    return {
        "text": text,
        "observationIds": [group[m].id for m in members],
        "priority": priority,
    }


def _batches(key: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool arguments holding ``items`` in calls of bounded count and size."""
    calls: list[dict[str, Any]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for item in items:
        item_size = len(json.dumps(item, ensure_ascii=False).encode("utf-8")) + 1
        if current and (len(current) >= _PER_CALL or size + item_size > _CALL_BYTES):
            calls.append({key: current})
            current, size = [], 0
        current.append(item)
        size += item_size
    if current:
        calls.append({key: current})
    return calls


class OfflineMemoryProvider:
    """A ``Provider`` whose observer and reflector are extractive and deterministic."""

    provider_id = "offline"
    model = OFFLINE_MODEL

    def __init__(self, *, calls_per_turn: int = _CALLS_PER_TURN) -> None:
        self.calls_per_turn = calls_per_turn

    async def generate(self, request: ProviderRequest) -> AsyncGenerator[ProviderEvent, None]:
        tools = {t.name for t in request.tools}
        prompt = next((m.content for m in request.messages if m.role == "user"), "")
        made = sum(len(m.tool_calls) for m in request.messages)
        name: str | None = None
        calls: list[dict[str, Any]] = []
        if RECORD_OBSERVATIONS in tools:
            name = RECORD_OBSERVATIONS
            calls = _batches("observations", extract_observations(parse_transcript(prompt)))
        elif RECORD_REFLECTIONS in tools:
            name = RECORD_REFLECTIONS
            calls = _batches("reflections", group_reflections(parse_observation_lines(prompt)))
        pending = calls[made : made + self.calls_per_turn]
        for offset, arguments in enumerate(pending):
            yield ToolCallEvent(
                id=f"offline_{made + offset}",
                name=name or "",
                arguments=json.dumps(arguments, ensure_ascii=False),
            )
        yield DoneEvent("tool_calls" if pending else "stop")

    async def aclose(self) -> None:
        """Nothing to release."""
