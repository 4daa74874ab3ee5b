"""What memory costs: the tokens each worker run spent, recorded with its memory record.

Every provider turn of a worker run ends in a ``DoneEvent`` whose ``usage`` is what the
provider reported (OpenAI's ``prompt_tokens`` / ``completion_tokens`` /
``prompt_tokens_details.cached_tokens``, Anthropic's ``input_tokens`` / ``output_tokens``
/ ``cache_read_input_tokens``). A turn whose provider reports none (the offline workers,
a server without ``include_usage``) is counted with our own estimate of its request and
its answer, and marked ``estimated``.

The worker loop adds each turn to the ``UsageMeter`` the runtime holds open
(``metering``, a context variable: no signature between them changes). The runtime puts
what was metered into the memory record the run writes, under ``metadata.usage``: a list
of ``{"worker", "outcome", "runs", "inputTokens", "outputTokens", "cachedTokens",
"estimated"}``. A failed run writes no record, so its usage rides on the next record the
runtime writes (``outcome: "failed"``). Entries are what every adapter stores and
copies whole, so the figures survive a reopen and a ``prism-om copy`` on every adapter, and
``fold_worker_usage`` (over entries) and ``store_worker_usage`` (over a store's memory
records only) read them alike.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ..entries import SessionEntry
    from ..stores.base import SessionStore

__all__ = [
    "MAX_RECORDS_READ",
    "UsageMeter",
    "current_meter",
    "fold_worker_usage",
    "metering",
    "normalize_usage",
    "record_usage",
    "store_worker_usage",
    "usage_lines",
]

USAGE_KEY: Final = "usage"
# Memory records a store read walks back at most (newest first): bounded on any branch.
MAX_RECORDS_READ: Final = 20_000
_WORKERS: Final = ("observer", "reflector", "consolidator", "dropper")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def normalize_usage(raw: Mapping[str, Any] | None) -> tuple[int, int, int] | None:
    """(input, output, cached) tokens from a provider's usage mapping; None when it does
    not give both input and output."""
    if not isinstance(raw, Mapping):
        return None

    def first(*keys: str) -> int | None:
        for key in keys:
            found = _int(raw.get(key))
            if found is not None:
                return found
        return None

    given_in = first("prompt_tokens", "input_tokens", "inputTokens", "promptTokens")
    given_out = first("completion_tokens", "output_tokens", "outputTokens", "completionTokens")
    if given_in is None or given_out is None:
        return None
    cached = first("cache_read_input_tokens", "cached_tokens", "cachedTokens")
    for details in ("prompt_tokens_details", "input_tokens_details"):
        inner = raw.get(details)
        if cached is None and isinstance(inner, Mapping):
            cached = _int(inner.get("cached_tokens"))
    return given_in, given_out, cached or 0


@dataclass
class _Tally:
    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False

    def add(self, other: _Tally) -> None:
        self.runs += other.runs
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_tokens += other.cached_tokens
        self.estimated = self.estimated or other.estimated


@dataclass
class UsageMeter:
    """The turns metered since the last ``take``; failed runs kept for the next record."""

    _current: _Tally = field(default_factory=_Tally)
    _pending: list[dict[str, Any]] = field(default_factory=list)

    def turn(self, reported: Mapping[str, Any] | None, estimate: tuple[int, int]) -> None:
        """One provider turn: its reported usage, else ``estimate`` (input, output)."""
        found = normalize_usage(reported)
        if found is None:
            self._current.input_tokens += estimate[0]
            self._current.output_tokens += estimate[1]
            self._current.estimated = True
        else:
            self._current.input_tokens += found[0]
            self._current.output_tokens += found[1]
            self._current.cached_tokens += found[2]

    def run(self) -> None:
        """A worker run started (a run may take several turns)."""
        self._current.runs += 1

    def _item(self, worker: str, outcome: str) -> dict[str, Any] | None:
        tally, self._current = self._current, _Tally()
        if tally.runs == 0 and tally.input_tokens == 0 and tally.output_tokens == 0:
            return None
        return {
            "worker": worker,
            "outcome": outcome,
            "runs": max(1, tally.runs),
            "inputTokens": tally.input_tokens,
            "outputTokens": tally.output_tokens,
            "cachedTokens": tally.cached_tokens,
            "estimated": tally.estimated,
        }

    def failed(self, worker: str) -> None:
        """The metered turns belong to a run that failed: keep them for the next record."""
        item = self._item(worker, "failed")
        if item is not None:
            self._pending.append(item)

    def take(self, worker: str) -> list[dict[str, Any]]:
        """What the record ``worker`` is writing carries: earlier failures, then this run."""
        items, self._pending = self._pending, []
        item = self._item(worker, "completed")
        return [*items, item] if item is not None else items


_METER: contextvars.ContextVar[UsageMeter | None] = contextvars.ContextVar(
    "prism_om_usage_meter", default=None
)


def current_meter() -> UsageMeter | None:
    return _METER.get()


@contextlib.contextmanager
def metering(meter: UsageMeter) -> Iterator[UsageMeter]:
    """Meter every worker turn run inside the block (in this task and those it awaits)."""
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


def record_usage(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The usage items a memory record's data carries (none for older records)."""
    metadata = data.get("metadata")
    items = metadata.get(USAGE_KEY) if isinstance(metadata, Mapping) else None
    return [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []


def _fold(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    workers: dict[str, dict[str, Any]] = {}
    total = {"runs": 0, "failedRuns": 0, "inputTokens": 0, "outputTokens": 0, "cachedTokens": 0}
    estimated = False
    for data in records:
        for item in record_usage(data):
            name = str(item.get("worker", "unknown"))
            row = workers.setdefault(
                name,
                {
                    "runs": 0,
                    "failedRuns": 0,
                    "inputTokens": 0,
                    "outputTokens": 0,
                    "cachedTokens": 0,
                    "estimated": False,
                },
            )
            runs = _int(item.get("runs")) or 0
            row["runs"] += runs
            total["runs"] += runs
            if item.get("outcome") == "failed":
                row["failedRuns"] += runs
                total["failedRuns"] += runs
            for key in ("inputTokens", "outputTokens", "cachedTokens"):
                value = _int(item.get(key)) or 0
                row[key] += value
                total[key] += value
            if item.get("estimated") is True:
                row["estimated"] = estimated = True
    names = (*_WORKERS, *sorted(set(workers) - set(_WORKERS)))
    ordered = {w: workers[w] for w in names if w in workers}
    return {"workers": ordered, "total": {**total, "estimated": estimated}}


def fold_worker_usage(entries: Iterable[SessionEntry]) -> dict[str, Any]:
    """Tokens spent by each worker over a branch's entries (the reference fold)."""
    return _fold(e.data for e in entries if e.kind == "custom" and e.data is not None)


async def store_worker_usage(
    store: SessionStore, session_id: str, leaf_id: str | None = None
) -> dict[str, Any]:
    """``fold_worker_usage`` of the branch, reading its memory records only: each one's
    predecessor is the memory head of its parent, so no message is read."""
    records: list[Mapping[str, Any]] = []
    head = await store.memory_head(session_id, leaf_id)
    while head is not None and len(records) < MAX_RECORDS_READ:
        entry = await store.get(head)
        if entry is None:
            break
        if entry.kind == "custom" and entry.data is not None:
            records.append(entry.data)
        if entry.parent_id is None:
            break
        head = await store.memory_head(session_id, entry.parent_id)
    return _fold(reversed(records))


def usage_lines(usage: Mapping[str, Any]) -> list[str]:
    """The figures for a person: one line per worker, then the total."""
    lines = []
    for name, row in usage["workers"].items():
        failed = f", {row['failedRuns']} failed" if row["failedRuns"] else ""
        mark = " (estimated)" if row["estimated"] else ""
        lines.append(
            f"worker {name}: {row['runs']} run(s){failed}, {row['inputTokens']:,} input + "
            f"{row['outputTokens']:,} output tokens ({row['cachedTokens']:,} cached){mark}"
        )
    if not lines:
        lines.append("worker tokens: none recorded yet")
    elif len(usage["workers"]) > 1:
        total = usage["total"]
        mark = " (estimated in part)" if total["estimated"] else ""
        lines.append(
            f"workers in all: {total['inputTokens']:,} input + {total['outputTokens']:,} "
            f"output tokens{mark}"
        )
    return lines
