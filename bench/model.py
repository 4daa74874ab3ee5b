"""Result records and the catalogue of workloads, shared by every runner and the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = [
    "DEFAULT_ADAPTERS",
    "OURS",
    "PG_FLOOR",
    "PG_REFERENCE",
    "PEERS",
    "REFERENCE",
    "REFERENCE_BUSY",
    "FLOOR",
    "FLOOR_V3",
    "WORKLOADS",
    "Result",
    "Workload",
]

Unit = Literal["s", "bytes"]


@dataclass(frozen=True)
class Workload:
    """One kind of work, measured per ``per``."""

    key: str
    title: str
    per: str


WORKLOADS: Final[dict[str, Workload]] = {
    w.key: w
    for w in (
        Workload("append_single", "append, one entry per call", "entry"),
        Workload("append_batch", "append_many, 100 entries per call", "batch of 100"),
        Workload("branch", "branch() of the current leaf (every entry)", "call"),
        Workload("page20", "page of 20 messages after a cursor (public page path)", "call"),
        Workload("page20_raw", "store.page_messages, 20 after a cursor (raw)", "call"),
        Workload("recall", "recall by id", "call"),
        Workload("context", "ledger() + context blocks (store path)", "call"),
        Workload("context_pure", "branch() + pure fold + context blocks", "call"),
        Workload(
            "context_capped",
            "ledger() + context blocks, the dropper capping the pool (store path)",
            "call",
        ),
        Workload(
            "context_capped_pure", "the same capped session: branch() + pure fold + blocks", "call"
        ),
        Workload("cold_start", "reopen: open + leaf + recent_messages(20)", "call"),
        Workload("peak_rss", "peak RSS: reopen and serve one turn", "process"),
        Workload("rtt", "one driver round trip (SELECT 1)", "call"),
    )
}

OURS: Final = ("memory", "jsonl", "sqlite", "postgres")
DEFAULT_ADAPTERS: Final = ("memory", "jsonl", "sqlite")
FLOOR: Final = "floor (sqlite3)"
# The branch floor on schema version 3's rows (the whole wire JSON in body), for reference.
FLOOR_V3: Final = "floor (sqlite3, v3 rows)"
REFERENCE: Final = "aiosqlite"
# The same round trip taken while another process keeps a second core busy: aiosqlite's
# hop wakes its thread from a CPU idle state when the machine is quiet (~60 us here) and
# much faster when a core is already awake (~23 us). Hop-free reads do not get faster,
# so the SQLite recall and page targets are checked against both.
REFERENCE_BUSY: Final = "aiosqlite, second core busy"
PG_FLOOR: Final = "floor (psycopg)"
PG_REFERENCE: Final = "psycopg"
PEERS: Final = ("SQLiteSession", "AsyncSqliteSaver", "om-memory")


@dataclass
class Result:
    """The median of ``samples`` (seconds per op, or bytes) for one system at one size."""

    workload: str
    system: str
    size: int
    samples: list[float]
    unit: Unit = "s"
    note: str = ""
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def value(self) -> float:
        ordered = sorted(self.samples)
        mid = len(ordered) // 2
        if len(ordered) % 2:
            return ordered[mid]
        return (ordered[mid - 1] + ordered[mid]) / 2
