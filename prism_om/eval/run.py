"""Running a benchmark: import each conversation, observe it as an attached agent would, measure.

Each conversation becomes a new session of the store (``eval-<id>``, suffixed when taken),
imported through the OpenAI-format importer with the session dates as message times, and
observed through the same machinery an attached agent uses (``create_observational_memory``
then ``attach``): each message (``observe="per-message"``, the default), each session
(``"per-session"``) or the whole conversation (``"once"``) is appended as one call of the
agent, so memory's own turn hook runs around it: it observes first when what memory lacks
would not fit the request, and after the call runs the post-run flush at the configured
thresholds (``observation.messageTokens``, ``reflection.observationTokens``, the pool cap).
``force=True`` instead flushes with ``force`` after each step (every threshold ignored),
which no attached agent does; the summary says which was run.

With ``pool_ratio`` the observation pool's cap is scaled to the conversation:
``context.observations_pool_max_tokens`` is ``pool_ratio`` times the transcript's tokens
and ``dropper.target_tokens`` half of that (the defaults' 20,000 / 10,000 proportion).

Offline figures per question: whether all key words of the answer (``matching``) are in
the next request (what the agent's next turn would send: the memory block and the request
window of ``core.request_window``, built by the attached context provider), in the rendered
memory alone, and in the raw transcript (each session headed by its date as the data writes
it); evidence cited by an active observation, and evidence in the request (every evidence
turn cited by an observation the request renders, or shown raw in its window); and search
recall (``search_recall``): the evidence turns the top 1, 5 and 10 hits of a search for the
question cite, over every kind, messages only and memory only. Per conversation: the
rendered memory's, the request's and the transcript's tokens, and each speaker's share of
the dropped observations against their share of all observations (an observation citing
several speakers counts for each in equal parts).

With ``judge`` (a model): each scored question is answered three times, with the next
request's memory and window, with the rendered memory alone and with the full transcript
as context, each answer judged by the model against the reference, with the context
tokens each used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..attach import create_observational_memory
from ..core.context_blocks import MEMORY_BLOCK_NAME, RECENT_MESSAGES_BLOCK_NAME
from ..core.projection import active_memory
from ..core.render import render_observational_memory
from ..entries import SessionEntry, entry_text
from ..host.agent import Agent, TurnRecord
from ..host.context import estimate_request_tokens
from ..importers import parse_conversation_bytes
from ..observational_memory.settings import (
    ObservationalMemorySettings,
    resolve_observational_memory_settings,
)
from ..observational_memory.worker_usage import store_worker_usage
from ..providers.base import Provider, ProviderRequest
from ..session import Session
from ..stores.base import SessionStore
from ..tokens import TokenEstimator, get_estimator
from ..workers import OFFLINE_MODEL, OfflineMemoryProvider
from ..workers.one_model import one_model_workers
from ..workers.runtime import FlushResult
from .formats import EvalConversation, EvalQuestion, EvalTurn
from .judge import Judgement, ModelJudge
from .matching import answer_in_text, key_words, missing_key_words, text_words
from .search_recall import SearchRecall, question_search_recall, unit_tokens

__all__ = [
    "DEFAULT_POOL_RATIO",
    "ConversationResult",
    "ObserveMode",
    "QuestionResult",
    "SpeakerShare",
    "eval_settings",
    "evaluate_conversation",
    "transcript_text",
]

DEFAULT_POOL_RATIO: float | None = None
_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]+")

ObserveMode = Literal["per-message", "per-session", "once"]
"""When the attached agent's call ends: after each message, each session, or the import."""
DEFAULT_OBSERVE: ObserveMode = "per-message"
_POST_RUN_ERROR = "observational-memory:post-run-error"
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
    """Key words absent from the rendered memory."""
    in_request: bool | None = None
    """All key words in the next request (memory block and request window)."""
    evidence_in_request: int = 0
    """Evidence turns cited by an observation the request renders, or shown raw in it."""
    evidence_shown_raw: int = 0
    """Evidence turns the request's window shows raw."""
    missing_in_request: list[str] = field(default_factory=list)
    memory: Judgement | None = None
    transcript: Judgement | None = None
    request: Judgement | None = None
    search: dict[str, SearchRecall] = field(default_factory=dict)
    """Search recall of the evidence turns per kind set (``search_recall``)."""

    @property
    def evidence_covered(self) -> bool | None:
        return None if not self.evidence else self.evidence_cited == self.evidence

    @property
    def evidence_in_request_covered(self) -> bool | None:
        return None if not self.evidence else self.evidence_in_request == self.evidence

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "category": self.category,
            "question": self.question,
            "answer": self.answer,
            "scored": self.scored,
            "evidence": self.evidence,
            "evidenceCited": self.evidence_cited,
            "evidenceInRequest": self.evidence_in_request,
            "evidenceShownRaw": self.evidence_shown_raw,
            "unmappedEvidence": self.unmapped_evidence,
            "inRequest": self.in_request,
            "inMemory": self.in_memory,
            "inTranscript": self.in_transcript,
            "missingWords": self.missing_words,
            "missingInRequest": self.missing_in_request,
            "search": {name: s.to_json() for name, s in self.search.items()},
        }
        if self.memory is not None:
            data["withMemory"] = self.memory.to_json()
        if self.transcript is not None:
            data["withTranscript"] = self.transcript.to_json()
        if self.request is not None:
            data["withRequest"] = self.request.to_json()
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
    request_tokens: int = 0
    """Tokens of the next request as it would be sent (``estimate_request_tokens``)."""
    memory_block_tokens: int = 0
    """Of which the memory block (the visible memory: what the window repeats is left out)."""
    window_tokens: int = 0
    """Of which the request window (``recent-messages``)."""
    window_messages: int = 0
    uncovered_messages: int = 0
    """Messages memory did not cover when the request was built (all in the window
    unless ``omitted_uncovered`` says otherwise)."""
    omitted_uncovered: int = 0
    flushes: int = 0
    """Flushes after a step that appended memory (observed, reflected or dropped)."""
    request_text: str = ""
    worker_usage: dict[str, Any] = field(default_factory=dict)
    """Tokens each memory worker spent, as ``prism-om status`` shows them
    (``observational_memory.worker_usage``)."""

    @property
    def request_ratio(self) -> float:
        return self.request_tokens / self.transcript_tokens if self.transcript_tokens else 0.0

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
            "requestTokens": self.request_tokens,
            "requestRatio": round(self.request_ratio, 4),
            "memoryBlockTokens": self.memory_block_tokens,
            "windowTokens": self.window_tokens,
            "windowMessages": self.window_messages,
            "uncoveredMessages": self.uncovered_messages,
            "omittedUncoveredMessages": self.omitted_uncovered,
            "flushesThatWorked": self.flushes,
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
            "workerUsage": self.worker_usage,
            "questions": [q.to_json() for q in self.questions],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def transcript_text(conversation: EvalConversation) -> str:
    """The raw transcript as a model would read it: a heading per session with its date as
    the data writes it (``1:56 pm on 8 May, 2023``), so an answer written "8 May 2023" can
    match; an ISO date would not. Without a written date, the first turn's ISO day."""
    written = dict(zip(conversation.sessions, conversation.session_dates, strict=False))
    lines: list[str] = []
    current = None
    for turn in conversation.turns:
        if turn.session != current:
            current = turn.session
            lines.append(f"## {turn.session} ({written.get(turn.session) or turn.timestamp[:10]})")
        lines.append(_turn_line(turn))
    return "\n".join(lines)


def eval_settings(
    settings: Mapping[str, Any] | None = None,
    *,
    pool_ratio: float | None = None,
    transcript_tokens: int = 0,
) -> ObservationalMemorySettings:
    """The memory settings a conversation is observed with: ``settings`` (as in a settings
    file) over the defaults, the pool scaled to the transcript when ``pool_ratio`` is set."""
    overrides: dict[str, Any] = {}
    if pool_ratio is not None:
        pool_max = max(1, round(pool_ratio * transcript_tokens))
        overrides["context"] = {
            "observations_pool_max_tokens": pool_max,
            "observations_pool_target_tokens": max(1, pool_max // 2),
        }
    return resolve_observational_memory_settings(dict(settings or {}), **overrides)


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
    observe: ObserveMode = DEFAULT_OBSERVE,
    force: bool = False,
    settings: Mapping[str, Any] | None = None,
    estimator: TokenEstimator | None = None,
    progress: Progress | None = None,
) -> ConversationResult:
    """Import, observe and measure one conversation in a new session of ``store``.

    ``observe``: what one call of the attached agent appends (a message, a session, the
    whole conversation); ``force``: flush with ``force`` after each instead of letting the
    turn hook flush at the thresholds.
    """
    est = estimator or get_estimator()
    tick = progress or (lambda _label: None)
    session_id = await _unused_session_id(store, conversation.id)
    entries = _entries(conversation, session_id)
    speaker_of = {e.id: t.speaker for e, t in zip(entries, conversation.turns, strict=True)}
    entry_of = {t.key: e.id for e, t in zip(entries, conversation.turns, strict=True)}
    transcript_tokens = sum(est.count(entry_text(e)) for e in entries)
    resolved = eval_settings(settings, pool_ratio=pool_ratio, transcript_tokens=transcript_tokens)
    session = Session(store, session_id)
    failures: list[str] = []

    def collect(event: str, data: dict[str, Any]) -> None:
        if event == _POST_RUN_ERROR:
            failures.append(f"post-run: {data.get('error')}")

    workers = provider or OfflineMemoryProvider()
    memory_setup = create_observational_memory(resolved, debug=collect)
    # The agent is never asked for a reply: the conversation's own messages are appended as
    # its calls, so memory's turn hook, context provider and runtime are the attached ones.
    agent = Agent(session, provider=workers)
    attached = memory_setup.attach(
        agent, estimator=est, **one_model_workers(workers, model or OFFLINE_MODEL)
    )
    groups = _groups(conversation.turns, entries, observe)
    worked = 0
    for label, batch in groups:
        flushed: FlushResult | None
        if force:
            await store.append_at_leaf(batch)
            flushed = await attached.flush(force=True)
        else:
            attached.last_flush = None  # set again by this call's post-run flush
            async with agent.hooked("run"):
                stored = await store.append_at_leaf(batch)
                # What a turn records for memory's post-run work (``Agent._turn`` does the
                # same): the entries it appended, so the held snapshot is advanced, not re-read.
                agent.last_turn = TurnRecord(ProviderRequest(), tuple(stored), len(stored))
            flushed = attached.last_flush
        if flushed is not None:
            worked += bool(flushed.entry_ids)
            if flushed.status == "failed":
                failures.append(f"{label}: {flushed.error}")
            observer = flushed.outcome("observer")
            if force and observer is not None and observer.status == "skipped":
                failures.append(f"{label}: observer skipped ({observer.reason})")
        tick(f"{conversation.id} {label}")

    # The next request, as the agent would send it after the conversation's last message.
    request = await agent.request_preview(None)
    request_text = "\n".join([request.system, *(m.content for m in request.messages)])
    built = attached.context_provider.last_blocks
    assert built is not None  # request_preview built the blocks
    block_tokens = {b.name: b.tokens for b in built.blocks}
    in_request: set[str] = set()
    for block in built.blocks:
        in_request.update(block.entry_ids)
    shown_raw = {
        e for b in built.blocks if b.name == RECENT_MESSAGES_BLOCK_NAME for e in b.entry_ids
    }

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

    transcript = transcript_text(conversation)
    words = _Words(text_words(request_text), text_words(memory), text_words(transcript))
    questions: list[QuestionResult] = []
    tokens_of = unit_tokens(entries, observations, reflections, est)
    for question in conversation.questions:
        result = _offline_question(question, entry_of, cited, in_request, shown_raw, words)
        if question.scored and result.evidence:
            evidence = [entry_of[k] for k in question.evidence if k in entry_of]
            result.search = await question_search_recall(
                store, session_id, question.question, evidence, tokens_of
            )
        if judge is not None and question.scored:
            result.request = await judge.assess(question, request_text)
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
        pool_max_tokens=resolved.context.observations_pool_max_tokens,
        speakers=speakers,
        questions=questions,
        failures=failures,
        memory_text=memory,
        request_tokens=estimate_request_tokens(request, est),
        memory_block_tokens=block_tokens.get(MEMORY_BLOCK_NAME, 0),
        window_tokens=block_tokens.get(RECENT_MESSAGES_BLOCK_NAME, 0),
        window_messages=len(built.window.selected),
        uncovered_messages=len(built.window.uncovered_ids)
        + len(built.window.omitted_uncovered_ids),
        omitted_uncovered=len(built.window.dropped_uncovered_ids),
        flushes=worked,
        request_text=request_text,
        worker_usage=await store_worker_usage(store, session_id),
    )


@dataclass(frozen=True)
class _Words:
    request: frozenset[str]
    memory: frozenset[str]
    transcript: frozenset[str]


def _groups(
    turns: Sequence[EvalTurn], entries: Sequence[SessionEntry], observe: ObserveMode
) -> list[tuple[str, list[SessionEntry]]]:
    if observe == "once":
        return [("all sessions", list(entries))]
    if observe == "per-message":
        return [(t.key, [e]) for t, e in zip(turns, entries, strict=True)]
    return _by_session(turns, entries)


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
    in_request: set[str],
    shown_raw: set[str],
    words: _Words,
) -> QuestionResult:
    checkable = question.scored and not question.abstention and bool(key_words(question.answer))
    evidence = [entry_of[k] for k in question.evidence if k in entry_of]
    answer = question.answer
    return QuestionResult(
        id=question.id,
        category=question.category,
        question=question.question,
        answer=answer,
        scored=question.scored,
        evidence=len(evidence),
        evidence_cited=sum(1 for e in evidence if e in cited),
        unmapped_evidence=len(question.unmapped_evidence),
        in_memory=answer_in_text(answer, words.memory) if checkable else None,
        in_transcript=answer_in_text(answer, words.transcript) if checkable else None,
        missing_words=missing_key_words(answer, words.memory) if checkable else [],
        in_request=answer_in_text(answer, words.request) if checkable else None,
        evidence_in_request=sum(1 for e in evidence if e in in_request),
        evidence_shown_raw=sum(1 for e in evidence if e in shown_raw),
        missing_in_request=missing_key_words(answer, words.request) if checkable else [],
    )
