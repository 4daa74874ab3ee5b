"""The quality harness behind ``prism-om eval``: memory benchmarks in the LoCoMo and
LongMemEval formats, observed offline or with a model, measured per question category.

``run_eval(path)`` imports every conversation of the file into a store (a throwaway
in-memory one unless ``db`` names another), observes it session by session, and returns
the summary that ``prism-om eval --json`` prints.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..providers.base import Provider
from ..stores import open_store
from .formats import (
    LOCOMO_CATEGORIES,
    EvalConversation,
    EvalQuestion,
    EvalTurn,
    detect_eval_format,
    load_eval_file,
    parse_eval_data,
)
from .judge import Judgement, ModelJudge
from .matching import answer_in_text, key_words, missing_key_words
from .report import plot_summary, summarize, summary_table
from .run import (
    DEFAULT_POOL_RATIO,
    ConversationResult,
    ObserveMode,
    QuestionResult,
    evaluate_conversation,
)

__all__ = [
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
    "evaluate_conversation",
    "key_words",
    "load_eval_file",
    "missing_key_words",
    "parse_eval_data",
    "plot_summary",
    "run_eval",
    "summarize",
    "summary_table",
]


async def run_eval(
    path: str | Path,
    *,
    format: str = "auto",
    db: str = "memory:",
    provider: Provider | None = None,
    model: str | None = None,
    pool_ratio: float | None = DEFAULT_POOL_RATIO,
    observe: ObserveMode = "per-session",
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Evaluate every conversation of a benchmark file; returns the JSON-ready summary.

    ``provider``/``model``: the memory workers' model, which also answers and judges the
    questions (offline workers and no QA when None). ``progress(done, total, label)``
    follows each observed session and answered question.
    """
    conversations = load_eval_file(path, format)
    judge = ModelJudge(provider, model) if provider is not None and model is not None else None
    total = sum(
        1 if observe == "once" else len({t.session for t in c.turns}) for c in conversations
    )
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
                    progress=tick,
                )
            )
    return summarize(
        results,
        file=str(path),
        format=conversations[0].format,
        provider=model or "offline",
        pool_ratio=pool_ratio,
        observe=observe,
    )
