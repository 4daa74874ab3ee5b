"""The harness's summary: figures per category, per conversation and overall, with their
spread over the conversations, as JSON, tables and a plot."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from .run import ConversationResult, QuestionResult
from .search_recall import LOCOMO_PAPER, search_recall_figures, search_recall_table

if TYPE_CHECKING:
    from ..observational_memory.settings import ObservationalMemorySettings

__all__ = ["SPREAD_RATES", "observe_line", "plot_summary", "summarize", "summary_table"]


def _rate(flags: Iterable[bool | None]) -> dict[str, Any]:
    known = [f for f in flags if f is not None]
    hits = sum(1 for f in known if f)
    return {"hits": hits, "of": len(known), "rate": round(hits / len(known), 4) if known else None}


def _mean(values: Sequence[int]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def _figures(questions: Sequence[QuestionResult]) -> dict[str, Any]:
    scored = [q for q in questions if q.scored]
    figures: dict[str, Any] = {
        "questions": len(questions),
        "scored": len(scored),
        "keywordsInRequest": _rate(q.in_request for q in scored),
        "keywordsInMemory": _rate(q.in_memory for q in scored),
        "keywordsInTranscript": _rate(q.in_transcript for q in scored),
        "evidenceInRequest": _rate(q.evidence_in_request_covered for q in scored),
        "evidenceCoverage": _rate(q.evidence_covered for q in scored),
        "searchRecall": search_recall_figures(q.search for q in scored),
    }
    judged = [q for q in scored if q.memory is not None and q.transcript is not None]
    if judged:
        figures["requestAccuracy"] = _rate(q.request.correct for q in judged if q.request)
        figures["requestContextTokens"] = _mean(
            [q.request.context_tokens for q in judged if q.request]
        )
        figures["memoryAccuracy"] = _rate(q.memory.correct for q in judged if q.memory)
        figures["transcriptAccuracy"] = _rate(q.transcript.correct for q in judged if q.transcript)
        figures["memoryContextTokens"] = _mean(
            [q.memory.context_tokens for q in judged if q.memory]
        )
        figures["transcriptContextTokens"] = _mean(
            [q.transcript.context_tokens for q in judged if q.transcript]
        )
    return figures


SPREAD_RATES = (
    "keywordsInRequest",
    "keywordsInMemory",
    "keywordsInTranscript",
    "evidenceInRequest",
    "evidenceCoverage",
)
"""The rates whose spread over the conversations the summary reports."""


def _spread(values: Sequence[float]) -> dict[str, Any]:
    """min / median / max / population stdev of per-conversation values (None: no value)."""
    if not values:
        return {"min": None, "median": None, "max": None, "stdev": None, "of": 0}
    return {
        "min": round(min(values), 4),
        "median": round(statistics.median(values), 4),
        "max": round(max(values), 4),
        "stdev": round(statistics.pstdev(values), 4),
        "of": len(values),
    }


def _by_category(questions: Sequence[QuestionResult]) -> dict[str, list[QuestionResult]]:
    categories: dict[str, list[QuestionResult]] = {}
    for q in questions:
        categories.setdefault(q.category, []).append(q)
    return dict(sorted(categories.items()))


def _settings_figures(settings: ObservationalMemorySettings | None) -> dict[str, Any]:
    if settings is None:
        return {}
    return {
        "observation.messageTokens": settings.observation.message_tokens,
        "reflection.observationTokens": settings.reflection.observation_tokens,
        "context.recentMessages": settings.context.recent_messages,
        "context.observationsPoolMaxTokens": settings.context.observations_pool_max_tokens,
        "context.compactAfterTokens": settings.context.compact_after_tokens,
    }


def observe_line(summary: dict[str, Any]) -> str:
    """One line saying how memory was made: as an attached agent, or forced."""
    step = {"per-message": "each message", "per-session": "each session", "once": "the import"}
    after = step.get(summary["observe"], summary["observe"])
    thresholds = summary.get("settings") or {}
    if summary.get("forced"):
        return (
            f"FORCED: a flush with force after {after}, every threshold ignored "
            "(an attached agent never does this; drop --force to measure what users get)"
        )
    return (
        f"observed as an attached agent: its post-turn flush after {after}, at "
        f"observation.messageTokens={thresholds.get('observation.messageTokens')} and "
        f"reflection.observationTokens={thresholds.get('reflection.observationTokens')}"
    )


def summarize(
    results: Sequence[ConversationResult],
    *,
    file: str,
    format: str,
    provider: str,
    pool_ratio: float | None,
    observe: str = "per-message",
    forced: bool = False,
    settings: ObservationalMemorySettings | None = None,
) -> dict[str, Any]:
    """Everything the harness measured, JSON-ready."""
    questions = [q for r in results for q in r.questions]
    transcript = sum(r.transcript_tokens for r in results)
    memory = sum(r.memory_tokens for r in results)
    request = sum(r.request_tokens for r in results)
    ratios = [v for r in results for v in r.drop_share_ratios().values() if v is not None]
    conversations = []
    for r in results:
        data = r.to_json()
        data["figures"] = _figures(r.questions)
        data["categories"] = {n: _figures(qs) for n, qs in _by_category(r.questions).items()}
        conversations.append(data)
    spread = {
        key: _spread(
            [rate for c in conversations if (rate := c["figures"][key]["rate"]) is not None]
        )
        for key in SPREAD_RATES
    }
    spread["memoryRatio"] = _spread([r.memory_ratio for r in results if r.transcript_tokens])
    spread["requestRatio"] = _spread([r.request_ratio for r in results if r.transcript_tokens])
    overall = _figures(questions)
    overall.update(
        {
            "conversations": len(results),
            "turns": sum(r.turns for r in results),
            "transcriptTokens": transcript,
            "memoryTokens": memory,
            "memoryRatio": round(memory / transcript, 4) if transcript else None,
            "requestTokens": request,
            "requestRatio": round(request / transcript, 4) if transcript else None,
            "observations": sum(r.observations for r in results),
            "droppedObservations": sum(r.dropped_observations for r in results),
            "reflections": sum(r.reflections for r in results),
            "unmappedEvidence": sum(q.unmapped_evidence for q in questions),
            "maxDropShareRatio": round(max(ratios), 3) if ratios else None,
            "failures": sum(len(r.failures) for r in results),
            "spread": spread,
        }
    )
    summary: dict[str, Any] = {
        "file": file,
        "format": format,
        "provider": provider,
        "poolRatio": pool_ratio,
        "observe": observe,
        "forced": forced,
        "settings": _settings_figures(settings),
        "overall": overall,
        "categories": {name: _figures(qs) for name, qs in _by_category(questions).items()},
        "conversations": conversations,
    }
    if format == "locomo":
        summary["searchRecallPaper"] = LOCOMO_PAPER
    summary["observedAs"] = observe_line(summary)
    return summary


def _cell(rate: dict[str, Any] | None) -> str:
    if not rate or rate["rate"] is None:
        return "-"
    return f"{rate['rate'] * 100:.0f}% ({rate['hits']}/{rate['of']})"


def summary_table(summary: dict[str, Any]) -> list[Table]:
    """A table per category, one of search recall per category, one per conversation
    (tokens, drops), one of the spread."""
    judged = "memoryAccuracy" in summary["overall"]
    by_category = Table(title=f"{summary['file']} ({summary['format']}, {summary['provider']})")
    columns = [
        "category",
        "scored",
        "answer in request",
        "in memory alone",
        "in transcript",
        "evidence in request",
        "evidence cited",
    ]
    if judged:
        columns += [
            "QA request",
            "QA memory",
            "QA transcript",
            "ctx request",
            "ctx memory",
            "ctx transcript",
        ]
    for name in columns:
        by_category.add_column(name, justify="left" if name == "category" else "right")
    rows = [*summary["categories"].items(), ("all", summary["overall"])]
    for name, figures in rows:
        cells = [
            name,
            str(figures["scored"]),
            _cell(figures["keywordsInRequest"]),
            _cell(figures["keywordsInMemory"]),
            _cell(figures["keywordsInTranscript"]),
            _cell(figures["evidenceInRequest"]),
            _cell(figures["evidenceCoverage"]),
        ]
        if judged:
            cells += [
                _cell(figures.get("requestAccuracy")),
                _cell(figures.get("memoryAccuracy")),
                _cell(figures.get("transcriptAccuracy")),
                str(figures.get("requestContextTokens") or "-"),
                str(figures.get("memoryContextTokens") or "-"),
                str(figures.get("transcriptContextTokens") or "-"),
            ]
        by_category.add_row(*cells, end_section=name == rows[-2][0] if len(rows) > 1 else False)

    per = Table(title="per conversation")
    for name in (
        "conversation",
        "scored",
        "in request",
        "in memory",
        "in transcript",
        "transcript tok",
        "memory tok",
        "request tok",
        "memory / transcript",
        "request / transcript",
        "obs",
        "dropped",
        "refl",
        "drop share / share (per speaker)",
    ):
        per.add_column(name, justify="left" if name.startswith(("conv", "drop")) else "right")
    for convo in summary["conversations"]:
        shares = ", ".join(
            f"{name} {_ratio(s['dropShareRatio'])}" for name, s in convo["speakers"].items()
        )
        figures = convo["figures"]
        per.add_row(
            convo["id"],
            str(figures["scored"]),
            _cell(figures["keywordsInRequest"]),
            _cell(figures["keywordsInMemory"]),
            _cell(figures["keywordsInTranscript"]),
            str(convo["transcriptTokens"]),
            str(convo["memoryTokens"]),
            str(convo["requestTokens"]),
            f"{convo['memoryRatio']:.2f}x",
            f"{convo['requestRatio']:.2f}x",
            str(convo["observations"]),
            str(convo["droppedObservations"]),
            str(convo["reflections"]),
            shares,
            end_section=convo is summary["conversations"][-1],
        )
    total = summary["overall"]
    per.add_row(
        "all",
        str(total["scored"]),
        _cell(total["keywordsInRequest"]),
        _cell(total["keywordsInMemory"]),
        _cell(total["keywordsInTranscript"]),
        str(total["transcriptTokens"]),
        str(total["memoryTokens"]),
        str(total["requestTokens"]),
        _times(total["memoryRatio"]),
        _times(total["requestRatio"]),
        str(total["observations"]),
        str(total["droppedObservations"]),
        str(total["reflections"]),
        f"max {_ratio(total['maxDropShareRatio'])}",
    )

    spread = Table(title=f"spread over {summary['overall']['conversations']} conversation(s)")
    for name in ("figure", "min", "median", "max", "stdev"):
        spread.add_column(name, justify="left" if name == "figure" else "right")
    for key, values in summary["overall"]["spread"].items():
        ratio = key.endswith("Ratio")
        spread.add_row(
            key, *(_spread_cell(values[k], ratio) for k in ("min", "median", "max", "stdev"))
        )
    return [by_category, search_recall_table(summary), per, spread]


def _spread_cell(value: float | None, ratio: bool) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" if ratio else f"{value * 100:.1f}%"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def plot_summary(summary: dict[str, Any], path: str | Path) -> bool:
    """Bar chart of the per-category rates; False (nothing written) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = list(summary["categories"])
    series = [
        ("evidence in request", "evidenceInRequest"),
        ("answer in request", "keywordsInRequest"),
        ("answer in memory alone", "keywordsInMemory"),
        ("answer in transcript", "keywordsInTranscript"),
    ]
    if "memoryAccuracy" in summary["overall"]:
        series += [
            ("QA with the request", "requestAccuracy"),
            ("QA with memory", "memoryAccuracy"),
            ("QA with transcript", "transcriptAccuracy"),
        ]
    width = 0.8 / len(series)
    figure, axes = plt.subplots(figsize=(max(6.0, 1.6 * len(names)), 4.0))
    for n, (label, key) in enumerate(series):
        values = [(summary["categories"][c].get(key) or {}).get("rate") or 0.0 for c in names]
        axes.bar([i + n * width for i in range(len(names))], values, width, label=label)
    axes.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(names))], names)
    axes.set_ylim(0, 1)
    axes.set_ylabel("rate")
    overall = summary["overall"]
    axes.set_title(
        f"{Path(summary['file']).name}: memory {overall['memoryRatio']}x transcript tokens"
    )
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return True
