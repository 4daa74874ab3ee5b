"""The quality harness behind ``prism-om eval``: memory benchmarks in the LoCoMo and
LongMemEval formats, observed offline or with a model, measured per question category.

``run_eval(paths)`` imports every conversation of the files (one file of many
conversations as LoCoMo publishes it, several files, or a directory) into a store (a
throwaway in-memory one unless ``db`` names another), observes each as an attached agent
would (message by message, at the configured thresholds; ``force=True`` flushes every step
with ``force`` instead), and returns the summary that ``prism-om eval --json`` prints.

Modules: ``formats`` (reading LoCoMo and LongMemEval files), ``run`` (one conversation
imported, observed and measured), ``matching`` (the answer's key words), ``search_recall``
(recall@1/5/10 of the evidence turns by search, per kind), ``judge`` (a model answering
and judging), ``report`` (the summary, its tables and plot).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from ..providers.base import Provider
from ..stores import open_store
from .formats import (
    LOCOMO_CATEGORIES,
    EvalConversation,
    EvalQuestion,
    EvalTurn,
    detect_eval_format,
    load_eval_file,
    load_eval_files,
    parse_eval_data,
)
from .judge import Judgement, ModelJudge
from .matching import answer_in_text, key_words, missing_key_words
from .report import plot_summary, summarize, summary_table
from .run import (
    DEFAULT_OBSERVE,
    DEFAULT_POOL_RATIO,
    ConversationResult,
    ObserveMode,
    QuestionResult,
    eval_settings,
    evaluate_conversation,
)

__all__ = [
    "DEFAULT_OBSERVE",
    "DEFAULT_POOL_RATIO",
    "LOCOMO_CATEGORIES",
    "ConversationResult",
    "EvalConversation",
    "EvalQuestion",
    "EvalTurn",
    "Judgement",
    "ModelJudge",
    "ObserveMode",
    "QuestionResult",
    "answer_in_text",
    "detect_eval_format",
    "eval_settings",
    "evaluate_conversation",
    "key_words",
    "load_eval_file",
    "load_eval_files",
    "missing_key_words",
    "parse_eval_data",
    "plot_summary",
    "run_eval",
    "summarize",
    "summary_table",
]


async def run_eval(
    path: str | Path | Sequence[str | Path],
    *,
    format: str = "auto",
    db: str = "memory:",
    provider: Provider | None = None,
    model: str | None = None,
    pool_ratio: float | None = DEFAULT_POOL_RATIO,
    observe: ObserveMode = DEFAULT_OBSERVE,
    force: bool = False,
    settings: Mapping[str, Any] | None = None,
    categories: Sequence[str] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Evaluate every conversation of the benchmark files; returns the JSON-ready summary.

    ``path``: a file (one conversation or a list of them), a directory of them, or a list of
    either. ``observe``: what one call of the attached agent appends (``per-message``,
    ``per-session``, ``once``); ``force``: flush with ``force`` after each step instead (the
    summary's ``forced`` says so). ``settings``: memory settings as in a settings file
    (``{"observation": {"messageTokens": 2000}}``). ``categories``: keep only these
    question categories (names, or LoCoMo's numbers as strings). ``provider``/``model``:
    the memory workers' model, which also answers and judges the questions (offline
    workers and no QA when None). ``progress(done, total, label)`` follows each step.
    """
    conversations = load_eval_files(path, format)
    if categories:
        conversations = _only_categories(conversations, categories)
    resolved = eval_settings(settings)  # invalid settings fail before anything runs
    judge = ModelJudge(provider, model) if provider is not None and model is not None else None
    total = sum(_steps(c, observe) for c in conversations)
    if judge is not None:
        total += sum(1 for c in conversations for q in c.questions if q.scored)
    done = 0

    def tick(label: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, label)

    results = []
    async with await open_store(db) as store:
        for conversation in conversations:
            results.append(
                await evaluate_conversation(
                    conversation,
                    store,
                    provider=provider,
                    model=model,
                    judge=judge,
                    pool_ratio=pool_ratio,
                    observe=observe,
                    force=force,
                    settings=settings,
                    progress=tick,
                )
            )
    names = [path] if isinstance(path, str | Path) else list(path)
    return summarize(
        results,
        file=", ".join(str(n) for n in names),
        format=conversations[0].format,
        provider=model or "offline",
        pool_ratio=pool_ratio,
        observe=observe,
        forced=force,
        settings=resolved,
    )


def _steps(conversation: EvalConversation, observe: ObserveMode) -> int:
    if observe == "once":
        return 1
    if observe == "per-message":
        return len(conversation.turns)
    return len({t.session for t in conversation.turns})


def _only_categories(
    conversations: list[EvalConversation], wanted: Sequence[str]
) -> list[EvalConversation]:
    """The conversations with only the questions of ``wanted`` (names or LoCoMo numbers)."""
    names = {LOCOMO_CATEGORIES.get(int(w), w) if w.isdigit() else w for w in wanted}
    known = {q.category for c in conversations for q in c.questions}
    unknown = sorted(names - known)
    if unknown:
        raise InvalidInputError(
            f"no question of category {', '.join(map(repr, unknown))} "
            f"(the data has: {', '.join(sorted(known))})"
        )
    return [
        replace(c, questions=tuple(q for q in c.questions if q.category in names))
        for c in conversations
    ]
