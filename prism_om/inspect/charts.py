"""Charts of a branch, drawn on the server as SVG geometry, with the numbers as text.

One read of the branch gives three series: transcript tokens (message entries, summed
as they come), the active observation pool's tokens after each memory record, and the
observations each observer pass recorded and each drop removed. Tokenising every message
of a long branch would take seconds, so the transcript line follows the messages'
characters, scaled to end at the branch's exact token count (``branch_tokens``, which the
store keeps); the pool, a few hundred observations, is counted exactly. Long series are thinned
to at most ``MAX_POINTS`` points, so the fragment stays small on any branch length.

Each chart's axes are labelled (entry position on the branch across, tokens or
observations up), and each series carries a few ``samples`` the template lists as a table,
so the figures read as text where no SVG or script runs (a screen reader, a text browser).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ..core.records import FOLDED_TYPE, OBSERVATIONS_DROPPED, OBSERVATIONS_RECORDED
from ..entries import SessionEntry, entry_text
from ..tokens import TokenEstimator, get_estimator

__all__ = ["CHART_HEIGHT", "CHART_WIDTH", "MAX_BARS", "MAX_POINTS", "SAMPLES", "branch_charts"]

CHART_WIDTH: Final = 640
CHART_HEIGHT: Final = 160
MAX_POINTS: Final = 240
MAX_BARS: Final = 60
# Rows of each chart's text table: evenly spaced points, the last one always among them.
SAMPLES: Final = 8
_PAD: Final = 4


def branch_charts(
    branch: Sequence[SessionEntry],
    transcript_tokens: int,
    estimator: TokenEstimator | None = None,
) -> dict[str, Any]:
    """Series and their SVG geometry for one branch (root first) whose messages hold
    ``transcript_tokens`` tokens."""
    est = estimator or get_estimator()
    characters: list[tuple[int, int]] = []
    pool: list[tuple[int, int]] = []
    passes: list[tuple[int, int, int]] = []  # position, recorded, dropped
    total = 0
    active: dict[str, int] = {}
    seen: set[str] = set()  # the fold's rule: an id recorded once, the first record wins
    pool_tokens = 0
    for position, entry in enumerate(branch):
        if entry.kind == "message":
            total += len(entry_text(entry))
            characters.append((position, total))
            continue
        # Read as stored: the store validated each record when it was appended, and
        # parsing every record again would cost more than the whole chart.
        data = entry.data or {}
        marker = entry.custom_type
        if marker == OBSERVATIONS_RECORDED:
            recorded = 0
            for item in data.get("observations") or ():
                memory_id = str(item.get("id"))
                if memory_id not in seen:
                    seen.add(memory_id)
                    active[memory_id] = est.count(str(item.get("text", "")))
                    pool_tokens += active[memory_id]
                    recorded += 1
            passes.append((position, recorded, 0))
        elif marker == OBSERVATIONS_DROPPED or _folded(entry):
            ids = (
                data.get("observationIds")
                if marker == OBSERVATIONS_DROPPED
                else data["memory"].get("droppedObservationIds")
            )
            dropped = 0
            for memory_id in ids or ():
                tokens = active.pop(memory_id, None)
                if tokens is not None:
                    pool_tokens -= tokens
                    dropped += 1
            passes.append((position, 0, dropped))
        else:
            continue
        pool.append((position, pool_tokens))
    ratio = transcript_tokens / total if total else 0.0
    transcript = [(p, round(c * ratio)) for p, c in characters]
    span = max(1, len(branch) - 1)
    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "transcript": _line(transcript, span),
        "pool": _line(pool, span),
        "passes": _bars(passes[-MAX_BARS:]),
        "passesTotal": len(passes),
        "entries": len(branch),
    }


def _folded(entry: SessionEntry) -> bool:
    memory = (entry.data or {}).get("memory") if entry.kind == "compaction" else None
    return isinstance(memory, dict) and memory.get("type") == FOLDED_TYPE


def _thin(points: list[tuple[int, int]]) -> list[tuple[int, int]]:
    if len(points) <= MAX_POINTS:
        return points
    step = len(points) / MAX_POINTS
    kept = [points[int(i * step)] for i in range(MAX_POINTS)]
    kept[-1] = points[-1]
    return kept


def _line(points: list[tuple[int, int]], span: int) -> dict[str, Any]:
    """A polyline over the branch positions, scaled to the chart."""
    shown = _thin(points)
    top = max((v for _, v in shown), default=0)
    scale = (CHART_HEIGHT - 2 * _PAD) / top if top else 0.0
    coords = " ".join(
        f"{_PAD + p / span * (CHART_WIDTH - 2 * _PAD):.1f},{CHART_HEIGHT - _PAD - v * scale:.1f}"
        for p, v in shown
    )
    return {
        "points": coords,
        "max": top,
        "last": points[-1][1] if points else 0,
        "count": len(points),
        "samples": _samples(points),
    }


def _samples(points: list[tuple[int, int]]) -> list[dict[str, int]]:
    """At most ``SAMPLES`` points (1-based entry position, value), the last included."""
    if not points:
        return []
    step = max(1, -(-len(points) // SAMPLES))
    picked = points[::step][: SAMPLES - 1]
    if picked[-1] != points[-1]:
        picked.append(points[-1])
    return [{"position": p + 1, "value": v} for p, v in picked]


def _bars(passes: list[tuple[int, int, int]]) -> dict[str, Any]:
    """One bar pair per pass: recorded up from the middle line, dropped down from it."""
    top = max((max(r, d) for _, r, d in passes), default=0)
    half = CHART_HEIGHT / 2 - _PAD
    width = (CHART_WIDTH - 2 * _PAD) / max(1, len(passes))
    bars = []
    for index, (position, recorded, dropped) in enumerate(passes):
        x = _PAD + index * width
        up = recorded / top * half if top else 0.0
        down = dropped / top * half if top else 0.0
        bars.append(
            {
                "x": round(x + width * 0.1, 1),
                "width": round(max(1.0, width * 0.8), 1),
                "up": round(up, 1),
                "upY": round(CHART_HEIGHT / 2 - up, 1),
                "down": round(down, 1),
                "position": position,
                "recorded": recorded,
                "dropped": dropped,
            }
        )
    return {"bars": bars, "max": top, "middle": CHART_HEIGHT / 2}
