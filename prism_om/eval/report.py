"""The harness's summary: figures per category and overall, as JSON, a table and a plot."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from .run import ConversationResult, QuestionResult

__all__ = ["plot_summary", "summarize", "summary_table"]


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
        "evidenceCoverage": _rate(q.evidence_covered for q in scored),
        "keywordsInMemory": _rate(q.in_memory for q in scored),
        "keywordsInTranscript": _rate(q.in_transcript for q in scored),
    }
    judged = [q for q in scored if q.memory is not None and q.transcript is not None]
    if judged:
        figures["memoryAccuracy"] = _rate(q.memory.correct for q in judged if q.memory)
        figures["transcriptAccuracy"] = _rate(q.transcript.correct for q in judged if q.transcript)
        figures["memoryContextTokens"] = _mean(
            [q.memory.context_tokens for q in judged if q.memory]
        )
        figures["transcriptContextTokens"] = _mean(
            [q.transcript.context_tokens for q in judged if q.transcript]
        )
    return figures


def summarize(
    results: Sequence[ConversationResult],
    *,
    file: str,
    format: str,
    provider: str,
    pool_ratio: float | None,
    observe: str = "per-session",
) -> dict[str, Any]:
    """Everything the harness measured, JSON-ready."""
    questions = [q for r in results for q in r.questions]
    categories: dict[str, list[QuestionResult]] = {}
    for q in questions:
        categories.setdefault(q.category, []).append(q)
    transcript = sum(r.transcript_tokens for r in results)
    memory = sum(r.memory_tokens for r in results)
    ratios = [v for r in results for v in r.drop_share_ratios().values() if v is not None]
    overall = _figures(questions)
    overall.update(
        {
            "conversations": len(results),
            "turns": sum(r.turns for r in results),
            "transcriptTokens": transcript,
            "memoryTokens": memory,
            "memoryRatio": round(memory / transcript, 4) if transcript else None,
            "observations": sum(r.observations for r in results),
            "droppedObservations": sum(r.dropped_observations for r in results),
            "reflections": sum(r.reflections for r in results),
            "unmappedEvidence": sum(q.unmapped_evidence for q in questions),
            "maxDropShareRatio": round(max(ratios), 3) if ratios else None,
            "failures": sum(len(r.failures) for r in results),
        }
    )
    return {
        "file": file,
        "format": format,
        "provider": provider,
        "poolRatio": pool_ratio,
        "observe": observe,
        "overall": overall,
        "categories": {name: _figures(qs) for name, qs in sorted(categories.items())},
        "conversations": [r.to_json() for r in results],
    }


def _cell(rate: dict[str, Any] | None) -> str:
    if not rate or rate["rate"] is None:
        return "-"
    return f"{rate['rate'] * 100:.0f}% ({rate['hits']}/{rate['of']})"


def summary_table(summary: dict[str, Any]) -> list[Table]:
    """A table per category, a table of tokens and drops per conversation."""
    judged = "memoryAccuracy" in summary["overall"]
    by_category = Table(title=f"{summary['file']} ({summary['format']}, {summary['provider']})")
    columns = ["category", "scored", "evidence cited", "answer in memory", "in transcript"]
    if judged:
        columns += ["QA memory", "QA transcript", "ctx memory", "ctx transcript"]
    for name in columns:
        by_category.add_column(name, justify="left" if name == "category" else "right")
    rows = [*summary["categories"].items(), ("all", summary["overall"])]
    for name, figures in rows:
        cells = [
            name,
            str(figures["scored"]),
            _cell(figures["evidenceCoverage"]),
            _cell(figures["keywordsInMemory"]),
            _cell(figures["keywordsInTranscript"]),
        ]
        if judged:
            cells += [
                _cell(figures.get("memoryAccuracy")),
                _cell(figures.get("transcriptAccuracy")),
                str(figures.get("memoryContextTokens") or "-"),
                str(figures.get("transcriptContextTokens") or "-"),
            ]
        by_category.add_row(*cells, end_section=name == rows[-2][0] if len(rows) > 1 else False)

    per = Table(title="memory per conversation")
    for name in (
        "conversation",
        "turns",
        "transcript tok",
        "memory tok",
        "ratio",
        "obs",
        "dropped",
        "reflections",
        "drop share / share (per speaker)",
    ):
        per.add_column(name, justify="left" if name.startswith(("conv", "drop")) else "right")
    for convo in summary["conversations"]:
        shares = ", ".join(
            f"{name} {_ratio(s['dropShareRatio'])}" for name, s in convo["speakers"].items()
        )
        per.add_row(
            convo["id"],
            str(convo["turns"]),
            str(convo["transcriptTokens"]),
            str(convo["memoryTokens"]),
            f"{convo['memoryRatio']:.2f}x",
            str(convo["observations"]),
            str(convo["droppedObservations"]),
            str(convo["reflections"]),
            shares,
        )
    return [by_category, per]


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
        ("evidence cited", "evidenceCoverage"),
        ("answer in memory", "keywordsInMemory"),
        ("answer in transcript", "keywordsInTranscript"),
    ]
    if "memoryAccuracy" in summary["overall"]:
        series += [
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
