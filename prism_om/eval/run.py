"""Running a benchmark: import each conversation, observe it session by session, measure.

Each conversation becomes a new session of the store (``eval-<id>``, suffixed when taken),
imported through the OpenAI-format importer with the session dates as message times. After
each of its sessions the memory runtime flushes with ``force`` (observe, reflect, drop), as
a host flushing at the end of each sitting would (or once after the whole import:
``observe="once"``). The settings are the defaults, so the memory's size is what the
observer and reflector make of the conversation. With ``pool_ratio`` the observation
pool's cap is scaled to the conversation instead: ``context.observations_pool_max_tokens``
is ``pool_ratio`` times the transcript's tokens and ``dropper.target_tokens`` half of that
(the defaults' 20,000 / 10,000 proportion), so a conversation of a few thousand tokens
meets the dropper as a long session meets its 20,000-token cap.

Offline figures per question: evidence coverage (every evidence turn cited by an
*active* observation), and whether all key words of the answer (``matching``) are in the
rendered memory, and in the raw transcript for comparison. Per conversation: rendered
memory tokens against transcript tokens, and each speaker's share of the dropped
observations against their share of all observations (an observation citing several
speakers counts for each in equal parts).

With ``answerer`` (a model): each scored question is answered twice, with the rendered
memory and with the full transcript as context, both answers judged by the model against
the reference (``judge``), with the context tokens each used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.projection import active_memory
from ..core.render import render_observational_memory
from ..entries import SessionEntry, entry_text
from ..importers import parse_conversation_bytes
from ..observational_memory.settings import DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS
from ..providers.base import Provider
from ..session import Session
from ..stores.base import SessionStore
from ..tokens import TokenEstimator, get_estimator
from ..workers import OFFLINE_MODEL, OfflineMemoryProvider
from ..workers.one_model import one_model_runtime
from .formats import EvalConversation, EvalQuestion, EvalTurn
from .judge import Judgement, ModelJudge
from .matching import answer_in_text, key_words, missing_key_words, text_words

__all__ = [
    "DEFAULT_POOL_RATIO",
    "ConversationResult",
    "ObserveMode",
    "QuestionResult",
    "SpeakerShare",
    "evaluate_conversation",
    "transcript_text",
]

DEFAULT_POOL_RATIO: float | None = None
_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]+")

ObserveMode = Literal["per-session", "once"]
Progress = Callable[[str], None]
"""Called with a short label after each step (a session observed, a question answered)."""


@dataclass
class QuestionResult:
    id: str
    category: str
    question: str
    answer: str
    scored: bool
    evidence: int
    evidence_cited: int
    unmapped_evidence: int
    in_memory: bool | None
    """All key words in the rendered memory; None when the answer cannot be checked."""
    in_transcript: bool | None
    missing_words: list[str] = field(default_factory=list)
    memory: Judgement | None = None
    transcript: Judgement | None = None

    @property
    def evidence_covered(self) -> bool | None:
        return None if not self.evidence else self.evidence_cited == self.evidence

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "category": self.category,
            "question": self.question,
            "answer": self.answer,
            "scored": self.scored,
            "evidence": self.evidence,
            "evidenceCited": self.evidence_cited,
            "unmappedEvidence": self.unmapped_evidence,
            "inMemory": self.in_memory,
            "inTranscript": self.in_transcript,
            "missingWords": self.missing_words,
        }
        if self.memory is not None:
            data["withMemory"] = self.memory.to_json()
        if self.transcript is not None:
            data["withTranscript"] = self.transcript.to_json()
        return data


@dataclass
class SpeakerShare:
    observations: float = 0.0
    dropped: float = 0.0


@dataclass
class ConversationResult:
    id: str
    format: str
    session_id: str
    turns: int
    transcript_tokens: int
    memory_tokens: int
    observations: int
    active_observations: int
    dropped_observations: int
    reflections: int
    pool_max_tokens: int
    speakers: dict[str, SpeakerShare]
    questions: list[QuestionResult]
    failures: list[str] = field(default_factory=list)
    memory_text: str = ""

    @property
    def memory_ratio(self) -> float:
        return self.memory_tokens / self.transcript_tokens if self.transcript_tokens else 0.0

    def drop_share_ratios(self) -> dict[str, float | None]:
        """Per speaker: share of dropped observations / share of all (None: no drops)."""
        total = sum(s.observations for s in self.speakers.values())
        dropped = sum(s.dropped for s in self.speakers.values())
        ratios: dict[str, float | None] = {}
        for name, share in self.speakers.items():
            if not dropped or not total or not share.observations:
                ratios[name] = None
            else:
                ratios[name] = (share.dropped / dropped) / (share.observations / total)
        return ratios

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "format": self.format,
            "sessionId": self.session_id,
            "turns": self.turns,
            "transcriptTokens": self.transcript_tokens,
            "memoryTokens": self.memory_tokens,
            "memoryRatio": round(self.memory_ratio, 4),
            "observations": self.observations,
            "activeObservations": self.active_observations,
            "droppedObservations": self.dropped_observations,
            "reflections": self.reflections,
            "poolMaxTokens": self.pool_max_tokens,
            "speakers": {
                name: {
                    "observations": round(s.observations, 2),
                    "dropped": round(s.dropped, 2),
                    "dropShareRatio": _round(self.drop_share_ratios()[name]),
                }
                for name, s in self.speakers.items()
            },
            "failures": self.failures,
            "questions": [q.to_json() for q in self.questions],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def transcript_text(conversation: EvalConversation) -> str:
    """The raw transcript as a model would read it: a dated heading per session."""
    lines: list[str] = []
    current = None
    for turn in conversation.turns:
        if turn.session != current:
            current = turn.session
            lines.append(f"## {turn.session} ({turn.timestamp[:10]})")
        lines.append(_turn_line(turn))
    return "\n".join(lines)


def _turn_line(turn: EvalTurn) -> str:
    text = turn.text
    if turn.speaker == turn.role:  # LoCoMo text already starts with the speaker's name
        text = f"{turn.role}: {text}"
    for call in turn.tool_calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            text += f"\n{function.get('name')}({function.get('arguments')})"
    return text


async def _unused_session_id(store: SessionStore, conversation_id: str) -> str:
    base = "eval-" + (_UNSAFE.sub("-", conversation_id).strip("-.:")[:90] or "conversation")
    existing = set(await store.sessions())
    candidate, suffix = base, 2
    while candidate in existing:
        candidate, suffix = f"{base}-{suffix}", suffix + 1
    return candidate


def _entries(conversation: EvalConversation, session_id: str) -> list[SessionEntry]:
    records = [turn.record() for turn in conversation.turns]
    plan = parse_conversation_bytes(
        json.dumps(records, ensure_ascii=False).encode(),
        name=f"{session_id}.json",
        format="openai",
        session_id=session_id,
    )
    # Every OpenAI chat record yields exactly one entry, in order.
    return plan.entries


async def evaluate_conversation(
    conversation: EvalConversation,
    store: SessionStore,
    *,
    provider: Provider | None = None,
    model: str | None = None,
    judge: ModelJudge | None = None,
    pool_ratio: float | None = DEFAULT_POOL_RATIO,
    observe: ObserveMode = "per-session",
    estimator: TokenEstimator | None = None,
    progress: Progress | None = None,
) -> ConversationResult:
    """Import, observe and measure one conversation in a new session of ``store``.

    ``observe="once"`` imports the whole conversation first and flushes once, as
    ``prism-om import`` then ``prism-om observe`` would.
    """
    est = estimator or get_estimator()
    tick = progress or (lambda _label: None)
    session_id = await _unused_session_id(store, conversation.id)
    entries = _entries(conversation, session_id)
    speaker_of = {e.id: t.speaker for e, t in zip(entries, conversation.turns, strict=True)}
    entry_of = {t.key: e.id for e, t in zip(entries, conversation.turns, strict=True)}
    transcript_tokens = sum(est.count(entry_text(e)) for e in entries)
    settings: dict[str, Any] = {}
    pool_max = DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS
    if pool_ratio is not None:
        pool_max = max(1, round(pool_ratio * transcript_tokens))
        settings["context"] = {
            "observations_pool_max_tokens": pool_max,
            "observations_pool_target_tokens": max(1, pool_max // 2),
        }
    session = Session(store, session_id)
    runtime = one_model_runtime(
        session,
        provider or OfflineMemoryProvider(),
        model or OFFLINE_MODEL,
        settings=settings,
        estimator=est,
    )
    failures: list[str] = []
    groups = _by_session(conversation.turns, entries)
    if observe == "once":
        groups = [("all sessions", list(entries))]
    for label, batch in groups:
        await store.append_at_leaf(batch)
        flushed = await runtime.flush(force=True)
        if flushed.status == "failed":
            failures.append(f"{label}: {flushed.error}")
        observer = flushed.outcome("observer")
        if observer is not None and observer.status == "skipped":
            failures.append(f"{label}: observer skipped ({observer.reason})")
        tick(f"{conversation.id} {label}")

    ledger = await store.ledger(session_id)
    observations, reflections = active_memory(ledger)
    memory = render_observational_memory(
        [r.reflection for r in reflections], [r.observation for r in observations]
    )
    active_ids = {r.id for r in observations}
    cited = {s for r in observations for s in r.observation.source_entry_ids}
    speakers: dict[str, SpeakerShare] = {t.speaker: SpeakerShare() for t in conversation.turns}
    for recorded in ledger.observations:
        names = [speaker_of[s] for s in recorded.observation.source_entry_ids if s in speaker_of]
        for name in names:
            share = speakers[name]
            share.observations += 1 / len(names)
            if recorded.id not in active_ids:
                share.dropped += 1 / len(names)

    memory_words = text_words(memory)
    transcript = transcript_text(conversation)
    transcript_words = text_words(transcript)
    questions: list[QuestionResult] = []
    for question in conversation.questions:
        result = _offline_question(question, entry_of, cited, memory_words, transcript_words)
        if judge is not None and question.scored:
            result.memory = await judge.assess(question, memory or "(no memory)")
            result.transcript = await judge.assess(question, transcript)
            tick(f"{conversation.id} {question.id}")
        questions.append(result)
    return ConversationResult(
        id=conversation.id,
        format=conversation.format,
        session_id=session_id,
        turns=len(conversation.turns),
        transcript_tokens=transcript_tokens,
        memory_tokens=est.count(memory),
        observations=len(ledger.observations),
        active_observations=len(observations),
        dropped_observations=len(ledger.observations) - len(observations),
        reflections=len(reflections),
        pool_max_tokens=pool_max,
        speakers=speakers,
        questions=questions,
        failures=failures,
        memory_text=memory,
    )


def _by_session(
    turns: Sequence[EvalTurn], entries: Sequence[SessionEntry]
) -> list[tuple[str, list[SessionEntry]]]:
    groups: list[tuple[str, list[SessionEntry]]] = []
    for turn, entry in zip(turns, entries, strict=True):
        if not groups or groups[-1][0] != turn.session:
            groups.append((turn.session, []))
        groups[-1][1].append(entry)
    return groups


def _offline_question(
    question: EvalQuestion,
    entry_of: dict[str, str],
    cited: set[str],
    memory_words: frozenset[str],
    transcript_words: frozenset[str],
) -> QuestionResult:
    checkable = question.scored and not question.abstention and bool(key_words(question.answer))
    evidence = [entry_of[k] for k in question.evidence if k in entry_of]
    return QuestionResult(
        id=question.id,
        category=question.category,
        question=question.question,
        answer=question.answer,
        scored=question.scored,
        evidence=len(evidence),
        evidence_cited=sum(1 for e in evidence if e in cited),
        unmapped_evidence=len(question.unmapped_evidence),
        in_memory=answer_in_text(question.answer, memory_words) if checkable else None,
        in_transcript=answer_in_text(question.answer, transcript_words) if checkable else None,
        missing_words=missing_key_words(question.answer, memory_words) if checkable else [],
    )
