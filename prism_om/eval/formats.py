"""Reading memory benchmarks: LoCoMo and LongMemEval files into one shape.

Both formats are described in ``shared/spec/eval-formats.md``; in short:

* **LoCoMo**: one conversation object or a list of them, flat (``speaker_a``,
  ``session_<n>``, ``session_<n>_date_time``, ``qa``) or nested (``sample_id``,
  ``conversation``, ``qa``). ``speaker_a`` becomes the ``user`` role and ``speaker_b`` the
  ``assistant``, each turn's text keeps the speaker's name (``"Caroline: ..."``), an image
  turn's ``blip_caption`` joins its text, and a turn's time is its session's date plus one
  minute per turn; the session's date string is kept as written (``session_dates``) for
  the transcript the answers are matched against. Malformed evidence ids (``D:11:26``,
  ``D30:05``) are read leniently; those that name no turn are counted, not fatal.
* **LongMemEval**: a list of instances, each a question over its own haystack of dated
  sessions; ``has_answer`` marks the evidence turns. Turns may also be OpenAI chat messages
  (assistant ``tool_calls``, ``tool`` results with ``tool_call_id``), so coding-agent
  sessions can be evaluated in the same shape.

The public files are read as published: ``load_eval_files`` takes a file holding one
conversation or a list of them (LoCoMo's ``locomo10.json``), several such files, or a
directory of them; a conversation id that two files share is prefixed with its file's name.

A malformed file raises ``ImportFormatError`` naming the file, the item index and the
field; nothing is imported.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from ..errors import ImportFormatError

__all__ = [
    "LOCOMO_CATEGORIES",
    "EvalConversation",
    "EvalQuestion",
    "EvalTurn",
    "EvalFormat",
    "detect_eval_format",
    "load_eval_file",
    "load_eval_files",
    "parse_eval_data",
]

EvalFormat = Literal["locomo", "longmemeval"]

LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
_TURN_SPACING = timedelta(minutes=1)
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\D*0*(\d+)\D+0*(\d+)")
_LOCOMO_DATE = "%I:%M %p on %d %B, %Y"
_LME_DATE = re.compile(r"^(\d{4})/(\d{2})/(\d{2})(?: \(\w+\))?(?: (\d{1,2}):(\d{2}))?$")


@dataclass(frozen=True)
class EvalTurn:
    """One message to import, as an OpenAI chat record plus what the metrics need."""

    key: str
    """``D1:3`` for LoCoMo; ``<session id>:<n>`` for LongMemEval."""
    role: Literal["user", "assistant", "tool"]
    speaker: str
    """Who said it: a LoCoMo speaker's name, else the role."""
    text: str
    timestamp: str
    session: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None

    def record(self) -> dict[str, Any]:
        """The turn as an OpenAI chat message with its time."""
        record: dict[str, Any] = {
            "role": self.role,
            "content": self.text,
            "timestamp": self.timestamp,
        }
        if self.tool_calls:
            record["tool_calls"] = list(self.tool_calls)
        if self.tool_call_id is not None:
            record["tool_call_id"] = self.tool_call_id
        return record


@dataclass(frozen=True)
class EvalQuestion:
    """A question with its reference answer and the turns that hold the evidence."""

    id: str
    question: str
    answer: str
    category: str
    evidence: tuple[str, ...]
    """Turn keys that exist in the conversation."""
    unmapped_evidence: tuple[str, ...] = ()
    """Evidence ids as written that name no turn."""
    scored: bool = True
    """False for LoCoMo's adversarial items, which are left out of every rate."""
    abstention: bool = False
    """LongMemEval ``_abs`` items: the right answer is to decline."""
    question_date: str | None = None


@dataclass(frozen=True)
class EvalConversation:
    id: str
    format: EvalFormat
    turns: tuple[EvalTurn, ...]
    questions: tuple[EvalQuestion, ...]
    sessions: tuple[str, ...] = field(default=())
    """Session labels in order; turns carry theirs."""
    session_dates: tuple[str, ...] = field(default=())
    """Each session's date as the data writes it (``1:56 pm on 8 May, 2023``), beside
    ``sessions``: answers are written that way ("8 May 2023"), not in ISO."""


def load_eval_file(path: str | Path, format: str = "auto") -> list[EvalConversation]:
    """Every conversation of a LoCoMo or LongMemEval file (``format``: or ``auto``)."""
    name = str(path)
    try:
        data = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise ImportFormatError(name, "no such file") from None
    except OSError as exc:
        raise ImportFormatError(name, f"cannot read it: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ImportFormatError(name, f"not JSON: {exc}") from None
    return parse_eval_data(data, name=name, format=format)


def load_eval_files(
    paths: str | Path | Sequence[str | Path], format: str = "auto"
) -> list[EvalConversation]:
    """Every conversation of the benchmark files ``paths`` (a directory: its ``*.json``
    files, by name), in order; all of one format. An id two files share is made unique by
    prefixing the file's name (``locomo_2/conv-26``)."""
    names = [paths] if isinstance(paths, str | Path) else list(paths)
    files: list[Path] = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.json") if p.is_file())
            if not found:
                raise ImportFormatError(str(path), "a directory holding no .json file")
            files.extend(found)
        else:
            files.append(path)
    if not files:
        raise ImportFormatError("<no file>", "no benchmark file given")
    loaded = [(path, load_eval_file(path, format)) for path in files]
    first_path, first = loaded[0]
    for path, conversations in loaded[1:]:
        if conversations[0].format != first[0].format:
            raise ImportFormatError(
                str(path),
                f"is {conversations[0].format} but {first_path} is {first[0].format}: "
                "evaluate one format at a time",
            )
    counts = Counter(c.id for _, conversations in loaded for c in conversations)
    out: list[EvalConversation] = []
    for path, conversations in loaded:
        for convo in conversations:
            unique = convo.id if counts[convo.id] == 1 else f"{path.stem}/{convo.id}"
            out.append(convo if unique == convo.id else _renamed(convo, unique))
    return out


def _renamed(convo: EvalConversation, new_id: str) -> EvalConversation:
    old = f"{convo.id}/"
    questions = tuple(
        replace(q, id=new_id + "/" + q.id[len(old) :] if q.id.startswith(old) else new_id)
        for q in convo.questions
    )
    return replace(convo, id=new_id, questions=questions)


def detect_eval_format(data: object, *, name: str = "<data>") -> EvalFormat:
    first = data[0] if isinstance(data, list) and data else data
    if isinstance(first, dict):
        if "haystack_sessions" in first:
            return "longmemeval"
        if "conversation" in first or "speaker_a" in first:
            return "locomo"
    raise ImportFormatError(
        name,
        "neither a LoCoMo conversation (speaker_a, session_<n>, qa) nor a list of "
        "LongMemEval instances (haystack_sessions); pass --format to say which",
    )


def parse_eval_data(
    data: object, *, name: str = "<data>", format: str = "auto"
) -> list[EvalConversation]:
    """The conversations of already-decoded benchmark data."""
    if format not in ("auto", "locomo", "longmemeval"):
        raise ImportFormatError(name, f"unknown format {format!r} (locomo, longmemeval, auto)")
    fmt = detect_eval_format(data, name=name) if format == "auto" else format
    items = data if isinstance(data, list) else [data]
    if not items:
        raise ImportFormatError(name, "holds no conversation")
    parse = _locomo if fmt == "locomo" else _longmemeval
    return [parse(item, _Where(name, index)) for index, item in enumerate(items)]


@dataclass(frozen=True)
class _Where:
    name: str
    index: int

    def error(self, reason: str) -> ImportFormatError:
        return ImportFormatError(self.name, reason, index=self.index)


def _field(item: dict[str, Any], key: str, kind: type | tuple[type, ...], where: _Where) -> Any:
    value = item.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise where.error(f"field {key!r} is missing or not a {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(
        {"str": "string", "list": "list", "dict": "object"}.get(k.__name__, k.__name__)
        for k in kinds
    )


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- LoCoMo -------------------------------------------------------------------------------


def _locomo(item: object, where: _Where) -> EvalConversation:
    if not isinstance(item, dict):
        raise where.error("a LoCoMo conversation must be a JSON object")
    convo = item.get("conversation", item)
    if not isinstance(convo, dict):
        raise where.error("field 'conversation' must be an object")
    speaker_a = _field(convo, "speaker_a", str, where)
    speaker_b = _field(convo, "speaker_b", str, where)
    roles = {speaker_a: "user", speaker_b: "assistant"}
    numbers = sorted(int(m.group(1)) for k in convo if (m := _SESSION_KEY.match(k)))
    if not numbers:
        raise where.error("holds no session_<n> list of turns")
    turns: list[EvalTurn] = []
    sessions: list[str] = []
    dates: list[str] = []
    for number in numbers:
        label = f"session_{number}"
        rows = _field(convo, label, list, where)
        stamp = _field(convo, f"{label}_date_time", str, where)
        try:
            start = datetime.strptime(stamp.strip(), _LOCOMO_DATE).replace(tzinfo=UTC)
        except ValueError:
            raise where.error(
                f"{label}_date_time {stamp!r} is not like '1:56 pm on 8 May, 2023'"
            ) from None
        sessions.append(label)
        dates.append(stamp.strip())
        for position, row in enumerate(rows):
            at = f"{label}[{position}]"
            if not isinstance(row, dict):
                raise where.error(f"{at} must be an object")
            speaker = row.get("speaker")
            if not isinstance(speaker, str) or speaker not in roles:
                raise where.error(
                    f"{at}: speaker {speaker!r} is neither {speaker_a!r} nor {speaker_b!r}"
                )
            text = row.get("text")
            if not isinstance(text, str):
                raise where.error(f"{at}: field 'text' is missing or not a string")
            caption = row.get("blip_caption")
            if isinstance(caption, str) and caption.strip():
                text = f"{text} [shares a photo: {caption.strip()}]"
            dia_id = row.get("dia_id")
            key = _dia_key(dia_id) if isinstance(dia_id, str) else None
            turns.append(
                EvalTurn(
                    key=key or f"D{number}:{position + 1}",
                    role=roles[speaker],  # type: ignore[arg-type]
                    speaker=speaker,
                    text=f"{speaker}: {text}",
                    timestamp=_iso(start + _TURN_SPACING * position),
                    session=label,
                )
            )
    known = {t.key for t in turns}
    qa = item.get("qa", [])
    if not isinstance(qa, list):
        raise where.error("field 'qa' must be a list")
    sample = item.get("sample_id")
    conversation_id = str(sample) if sample is not None else f"conversation-{where.index}"
    questions = [
        _locomo_question(q, f"{conversation_id}/q{n}", known, where.error, n)
        for n, q in enumerate(qa)
    ]
    return EvalConversation(
        conversation_id, "locomo", tuple(turns), tuple(questions), tuple(sessions), tuple(dates)
    )


def _dia_key(raw: str) -> str | None:
    """``D3:7`` for ``D3:7``, ``D:3:7`` or ``D03:07``; None when no two numbers are found."""
    match = _DIA_ID.search(raw)
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else None


def _locomo_question(q: object, qid: str, known: set[str], error: Any, n: int) -> EvalQuestion:
    if not isinstance(q, dict):
        raise error(f"qa[{n}] must be an object")
    question = q.get("question")
    if not isinstance(question, str):
        raise error(f"qa[{n}]: field 'question' is missing or not a string")
    category = q.get("category")
    if not isinstance(category, int) or isinstance(category, bool):
        raise error(f"qa[{n}]: field 'category' must be an integer (1-5)")
    adversarial = category == 5
    answer = q.get("answer", q.get("adversarial_answer") if adversarial else None)
    if not isinstance(answer, str | int | float) or isinstance(answer, bool):
        raise error(f"qa[{n}]: field 'answer' is missing or not a string or number")
    raw_evidence = q.get("evidence", [])
    if not isinstance(raw_evidence, list):
        raise error(f"qa[{n}]: field 'evidence' must be a list")
    mapped: list[str] = []
    unmapped: list[str] = []
    for raw in raw_evidence:
        keys = [_dia_key(part) for part in str(raw).split(";")] if isinstance(raw, str) else []
        good = [k for k in keys if k is not None and k in known]
        if good:
            mapped.extend(k for k in good if k not in mapped)
        else:
            unmapped.append(str(raw))
    return EvalQuestion(
        id=qid,
        question=question,
        answer=str(answer),
        category=LOCOMO_CATEGORIES.get(category, f"category-{category}"),
        evidence=tuple(mapped),
        unmapped_evidence=tuple(unmapped),
        scored=not adversarial,
    )


# -- LongMemEval --------------------------------------------------------------------------


def _lme_date(raw: object, what: str, where: _Where) -> datetime:
    if isinstance(raw, str):
        match = _LME_DATE.match(raw.strip())
        if match:
            year, month, day, hour, minute = match.groups()
            return datetime(
                int(year), int(month), int(day), int(hour or 0), int(minute or 0), tzinfo=UTC
            )
        try:
            moment = datetime.fromisoformat(raw.strip())
        except ValueError:
            pass
        else:
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    raise where.error(f"{what} {raw!r} is not like '2023/05/20 (Sat) 02:21' or ISO 8601")


def _longmemeval(item: object, where: _Where) -> EvalConversation:
    if not isinstance(item, dict):
        raise where.error("a LongMemEval instance must be a JSON object")
    qid = _field(item, "question_id", str, where)
    sessions = _field(item, "haystack_sessions", list, where)
    dates = _field(item, "haystack_dates", list, where)
    ids = item.get("haystack_session_ids") or [f"s{n}" for n in range(len(sessions))]
    if not (len(sessions) == len(dates) == len(ids)):
        raise where.error(
            "haystack_sessions, haystack_dates and haystack_session_ids differ in length"
        )
    # has_answer marks evidence inside the answer sessions; elsewhere it is not evidence
    # for this question (the sessions are shared between instances).
    answer_sessions = {str(s) for s in item.get("answer_session_ids") or ()}
    turns: list[EvalTurn] = []
    evidence: list[str] = []
    labels: list[str] = []
    written: list[str] = []
    for n, (session_id, raw_date, session) in enumerate(zip(ids, dates, sessions, strict=True)):
        start = _lme_date(raw_date, f"haystack_dates[{n}]", where)
        if not isinstance(session, list):
            raise where.error(f"haystack_sessions[{n}] must be a list of turns")
        label = str(session_id)
        labels.append(label)
        written.append(str(raw_date).strip())
        for position, turn in enumerate(session):
            at = f"haystack_sessions[{n}][{position}]"
            if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant", "tool"):
                raise where.error(f"{at} must be a turn with role user, assistant or tool")
            content = turn.get("content")
            if content is None:
                content = ""
            if not isinstance(content, str):
                raise where.error(f"{at}: field 'content' must be a string")
            calls = turn.get("tool_calls") or ()
            if not isinstance(calls, list | tuple):
                raise where.error(f"{at}: field 'tool_calls' must be a list")
            call_id = turn.get("tool_call_id")
            if turn["role"] == "tool" and not isinstance(call_id, str):
                raise where.error(f"{at}: a tool turn needs a string 'tool_call_id'")
            key = f"{label}:{position + 1}"
            if turn.get("has_answer") and (not answer_sessions or label in answer_sessions):
                evidence.append(key)
            turns.append(
                EvalTurn(
                    key=key,
                    role=turn["role"],
                    speaker=turn["role"],
                    text=content,
                    timestamp=_iso(start + _TURN_SPACING * position),
                    session=label,
                    tool_calls=tuple(calls),
                    tool_call_id=call_id if isinstance(call_id, str) else None,
                )
            )
    question = _field(item, "question", str, where)
    answer = item.get("answer")
    if not isinstance(answer, str | int | float) or isinstance(answer, bool):
        raise where.error("field 'answer' is missing or not a string or number")
    question_date = item.get("question_date")
    return EvalConversation(
        id=qid,
        format="longmemeval",
        turns=tuple(turns),
        questions=(
            EvalQuestion(
                id=qid,
                question=question,
                answer=str(answer),
                category=str(item.get("question_type") or "unknown"),
                evidence=tuple(evidence),
                abstention=qid.endswith("_abs"),
                question_date=_iso(_lme_date(question_date, "question_date", where))
                if question_date is not None
                else None,
            ),
        ),
        sessions=tuple(labels),
        session_dates=tuple(written),
    )
