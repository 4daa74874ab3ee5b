"""Tables, target checks, the markdown report and the scaling plot."""

from __future__ import annotations

import os
import platform
import sqlite3
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata

from .jsonl_floor import JSONL_FLOOR
from .model import (
    FLOOR,
    FLOOR_V3,
    OURS,
    PEERS,
    PG_FLOOR,
    PG_REFERENCE,
    REFERENCE,
    REFERENCE_BUSY,
    WORKLOADS,
    Result,
)
from .paired import PAIRED_ROUNDS, ratio_key

__all__ = [
    "FINDINGS_HEADING",
    "RunInfo",
    "Target",
    "check_targets",
    "fmt_value",
    "kept_findings",
    "machine_lines",
    "markdown_report",
    "plot_scaling",
    "tables",
]


@dataclass(frozen=True)
class RunInfo:
    """What produced a set of results."""

    command: str
    seconds: float
    sizes: list[int]
    repeat: int
    recall_path: str
    notes: list[str]


@dataclass(frozen=True)
class Target:
    """One stated goal and whether this run met it."""

    name: str
    met: bool | None
    detail: str

    @property
    def verdict(self) -> str:
        return "not checked" if self.met is None else ("met" if self.met else "MISSED")


def fmt_value(value: float, unit: str) -> str:
    """Seconds as ns/µs/ms/s, bytes as MB."""
    if unit == "bytes":
        return f"{value / 1e6:,.0f} MB"
    if value < 1e-6:
        return f"{value * 1e9:.0f} ns"
    if value < 1e-3:
        return f"{value * 1e6:.1f} µs"
    if value < 1:
        return f"{value * 1e3:.2f} ms"
    return f"{value:.2f} s"


def _index(results: Iterable[Result]) -> dict[tuple[str, str, int], Result]:
    return {(r.workload, r.system, r.size): r for r in results}


def _systems(results: Sequence[Result], workload: str) -> list[str]:
    order = [
        *OURS,
        FLOOR,
        FLOOR_V3,
        PG_FLOOR,
        JSONL_FLOOR,
        *PEERS,
        REFERENCE,
        REFERENCE_BUSY,
        PG_REFERENCE,
    ]
    present = {r.system for r in results if r.workload == workload}
    return [s for s in order if s in present]


def _best_peer(
    index: dict[tuple[str, str, int], Result], workload: str, size: int
) -> tuple[str, float] | None:
    found = [(p, index[(workload, p, size)].value) for p in PEERS if (workload, p, size) in index]
    return min(found, key=lambda pv: pv[1]) if found else None


# The round trips a read can be paired with, in the order their ratios are printed.
_TRIPS = ((REFERENCE, "idle"), (REFERENCE_BUSY, "busy"), (PG_REFERENCE, ""))


def _trip_ratios(r: Result) -> list[tuple[str, str, float]]:
    """(round trip, its label, the median paired ratio) for each trip ``r`` was paired with."""
    return [
        (system, label, r.extra[ratio_key(system)])
        for system, label in _TRIPS
        if ratio_key(system) in r.extra
    ]


def tables(results: Sequence[Result], sizes: Sequence[int]) -> str:
    """One markdown table per workload: systems by sizes, ours with ratios."""
    index = _index(results)
    out: list[str] = []
    for key, workload in WORKLOADS.items():
        systems = _systems(results, key)
        if not systems:
            continue
        rows = [r for r in results if r.workload == key]
        with_cpu = any("cpu" in r.extra for r in rows)
        with_trips = any(_trip_ratios(r) for r in rows)
        out.append(f"### {workload.title} (per {workload.per})\n")
        head = ["system", *(f"{s:,}" for s in sizes), "x floor", "x best peer"]
        head += ["CPU"] * with_cpu + ["x round trip (paired)"] * with_trips + ["notes"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for system in systems:
            cells = [system if system not in OURS else f"prism-om {system}"]
            notes: list[str] = []
            floor_ratios: list[str] = []
            peer_ratios: list[str] = []
            cpu: list[str] = []
            trips: list[str] = []
            for size in sizes:
                r = index.get((key, system, size))
                if r is None:
                    cells.append("—")
                    for column in (floor_ratios, peer_ratios, cpu, trips):
                        column.append("—")
                    continue
                cells.append(fmt_value(r.value, r.unit))
                if r.note and r.note not in notes:
                    notes.append(r.note)
                floor = index.get((key, PG_FLOOR if system == "postgres" else FLOOR, size))
                best = _best_peer(index, key, size)
                floor_ratios.append(f"{r.value / floor.value:.2f}" if floor else "—")
                peer_ratios.append(f"{r.value / best[1]:.2f} ({best[0]})" if best else "—")
                cpu.append(fmt_value(r.extra["cpu"], "s") if "cpu" in r.extra else "—")
                paired = _trip_ratios(r)
                trips.append(
                    ", ".join(f"{x:.2f}" + (f" {label}" if label else "") for _, label, x in paired)
                    or "—"
                )
            if system in OURS:
                cells.append(" / ".join(floor_ratios))
                cells.append(" / ".join(peer_ratios))
            else:
                cells.extend(["", ""])
            if with_cpu:
                cells.append(" / ".join(cpu))
            if with_trips:
                cells.append(" / ".join(trips) if any(t != "—" for t in trips) else "")
            cells.append("; ".join(notes))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    if any(r.workload == "rtt" for r in results):
        out.append(
            "The page of 20, the raw page and recall on SQLite and PostgreSQL are timed in "
            "rounds paired with their driver's round trip (aiosqlite or psycopg `SELECT 1`, "
            f"`bench/paired.py`): each of {PAIRED_ROUNDS} rounds times a block of round trips "
            "and a block of calls (each at least 20 ms), in alternating order, and "
            "*x round trip* is the median over the rounds of call / round trip of the same "
            "round. Their time is the median of the idle rounds, CPU is `time.process_time` "
            "per call (every thread of the process). The aiosqlite round trip is paired "
            "twice, idle and with another core kept busy by a spinning process (its thread "
            "then wakes faster); the SQLite targets take the larger of the two ratios. The "
            "round trip's own row is the median of all its rounds. The PostgreSQL floor's "
            "ratios are against the psycopg floor.\n"
        )
    return "\n".join(out)


def _flat(
    index: dict[tuple[str, str, int], Result], key: str, system: str, sizes: list[int]
) -> tuple[bool, str]:
    small, large = index[(key, system, sizes[0])].value, index[(key, system, sizes[-1])].value
    ratio = large / small
    return ratio <= 1.5, f"{sizes[-1]:,} / {sizes[0]:,} entries = {ratio:.2f}x"


def _sqlite_trips(r: Result) -> list[tuple[str, str, float]]:
    return [t for t in _trip_ratios(r) if t[0] in (REFERENCE, REFERENCE_BUSY)]


def _paired_detail(
    index: dict[tuple[str, str, int], Result], key: str, system: str, size: int
) -> str:
    """``10,000: 58 µs (CPU 55 µs) = 2.9x the idle round trip (26 µs), 3.1x busy (21 µs)``."""
    r = index[(key, system, size)]
    cpu = f" (CPU {fmt_value(r.extra['cpu'], 's')})" if "cpu" in r.extra else ""
    parts = []
    for trip, label, x in _trip_ratios(r):
        rtt = index.get(("rtt", trip, size))
        of = f" ({fmt_value(rtt.value, 's')})" if rtt else ""
        parts.append(f"{x:.1f}x " + (f"the {label} round trip" if label else "the round trip") + of)
    return f"{size:,}: {fmt_value(r.value, 's')}{cpu} = " + ", ".join(parts)


def check_targets(results: Sequence[Result], sizes: Sequence[int]) -> list[Target]:
    """The stated targets, checked against this run (never asserted anywhere)."""
    index = _index(results)
    sizes = sorted(sizes)
    ordered = list(sizes)
    targets: list[Target] = []

    def has(key: str, system: str, size: int) -> bool:
        return (key, system, size) in index

    # 1. append_many within 1.3x of the floor.
    parts, ok = [], True
    for n in sizes:
        if has("append_batch", "sqlite", n) and has("append_batch", FLOOR, n):
            ratio = (
                index[("append_batch", "sqlite", n)].value / index[("append_batch", FLOOR, n)].value
            )
            ok &= ratio <= 1.3
            parts.append(f"{n:,}: {ratio:.2f}x")
    targets.append(
        Target(
            "SQLite append_many within 1.3x of its floor", ok if parts else None, ", ".join(parts)
        )
    )

    # 2. recall within 1.5x and page within 2x of the round trip, paired per round, flat.
    for key, label, bound in (
        ("recall", "recall", 1.5),
        ("page20", "page of 20 (public page path)", 2),
        ("page20_raw", "page of 20 (raw store.page_messages, for reference)", 2),
    ):
        measured = [
            n for n in sizes if has(key, "sqlite", n) and _sqlite_trips(index[(key, "sqlite", n)])
        ]
        if not measured:
            targets.append(
                Target(f"SQLite {label} within {bound}x of a round trip", None, "not measured")
            )
            continue
        # The larger of the idle and the busy ratio: a hop-free read must beat the hop
        # however quickly the hop's thread wakes.
        ratios = [max(x for _, _, x in _sqlite_trips(index[(key, "sqlite", n)])) for n in measured]
        flat, how = _flat(index, key, "sqlite", measured)
        met = all(r <= bound for r in ratios) and flat
        detail = ", ".join(_paired_detail(index, key, "sqlite", n) for n in measured)
        detail += f"; growth {how}"
        if 1_000_000 not in measured:
            detail += " (1,000,000 not run: flatness checked up to the largest size)"
        targets.append(
            Target(f"SQLite {label} within {bound}x of one aiosqlite round trip, flat", met, detail)
        )
    targets += _floor_targets(index, sizes)

    # 2b. PostgreSQL: recall <= 2x and page <= 3x of a psycopg round trip, paired per
    # round, flat; append_many <= 2x the driver's own executemany of the same rows.
    for key, label, bound in (
        ("recall", "recall", 2),
        ("page20", "page of 20 (public page path)", 3),
    ):
        pg_key = ratio_key(PG_REFERENCE)
        measured = [
            n
            for n in sizes
            if has(key, "postgres", n) and pg_key in index[(key, "postgres", n)].extra
        ]
        if not measured:
            continue
        ratios = [index[(key, "postgres", n)].extra[pg_key] for n in measured]
        flat, how = _flat(index, key, "postgres", measured)
        detail = ", ".join(_paired_detail(index, key, "postgres", n) for n in measured)
        targets.append(
            Target(
                f"PostgreSQL {label} within {bound}x of one psycopg round trip, flat",
                all(r <= bound for r in ratios) and flat,
                f"{detail}; growth {how}",
            )
        )
    parts, ok = [], True
    for n in sizes:
        if has("append_batch", "postgres", n) and has("append_batch", PG_FLOOR, n):
            pg = index[("append_batch", "postgres", n)].value
            ratio = pg / index[("append_batch", PG_FLOOR, n)].value
            ok &= ratio <= 2
            parts.append(f"{n:,}: {ratio:.2f}x")
    if parts:
        targets.append(
            Target("PostgreSQL append_many within 2x of psycopg executemany", ok, ", ".join(parts))
        )

    # 3. ledger + blocks, with the dropper capping the pool, at 1M at least 100x faster
    # than the pure fold, and flat (<= 1.3x from the smallest size to the largest).
    top = sizes[-1]
    if has("context_capped", "sqlite", top) and has("context_capped_pure", "sqlite", top):
        fast = index[("context_capped", "sqlite", top)].value
        speedup = index[("context_capped_pure", "sqlite", top)].value / fast
        growth = fast / index[("context_capped", "sqlite", ordered[0])].value
        met = speedup >= 100 and growth <= 1.3
        detail = (
            f"at {top:,}: {speedup:.1f}x faster than the pure fold; growth "
            f"{top:,} / {ordered[0]:,} entries = {growth:.2f}x"
        )
        if top < 1_000_000:
            detail += " (1,000,000 not run: judged at the largest size)"
        targets.append(
            Target(
                "SQLite ledger()+blocks with the dropper capping the pool: ≥100x faster "
                "than the fold, flat (≤1.3x)",
                met,
                detail,
            )
        )

    # 4. faster than every peer on every shared workload.
    for peer in PEERS:
        shared = sorted(
            {(r.workload, r.size) for r in results if r.system == peer and r.workload != "peak_rss"}
        )
        losses = [
            f"{k} @ {n:,} ({index[(k, 'sqlite', n)].value / index[(k, peer, n)].value:.2f}x)"
            for k, n in shared
            if has(k, "sqlite", n) and index[(k, "sqlite", n)].value >= index[(k, peer, n)].value
        ]
        compared = [(k, n) for k, n in shared if has(k, "sqlite", n)]
        if not compared:
            targets.append(Target(f"SQLite faster than {peer}", None, "peer not measured"))
            continue
        detail = f"{len(compared) - len(losses)} of {len(compared)} comparisons won" + (
            f"; slower on {', '.join(losses)}" if losses else ""
        )
        targets.append(
            Target(f"SQLite faster than {peer} on every shared workload", not losses, detail)
        )
    targets += _memory_jsonl_targets(index, sizes)
    return targets


def _memory_jsonl_targets(
    index: dict[tuple[str, str, int], Result], sizes: list[int]
) -> list[Target]:
    """Memory and JSONL: recall and page flat (≤ 1.2x from the smallest size to the
    largest); JSONL reopen ≤ 1.5x its floor (read + json.loads) at 100,000 and above."""
    targets: list[Target] = []
    for adapter in ("memory", "jsonl"):
        for key, label in (("recall", "recall"), ("page20", "page of 20 (public path)")):
            measured = [n for n in sizes if (key, adapter, n) in index]
            if len(measured) < 2:
                continue
            small, large = (index[(key, adapter, n)].value for n in (measured[0], measured[-1]))
            detail = ", ".join(
                f"{n:,}: {fmt_value(index[(key, adapter, n)].value, 's')}" for n in measured
            )
            growth = large / small
            targets.append(
                Target(
                    f"{adapter} {label} flat (≤ 1.2x)",
                    growth <= 1.2,
                    f"{detail}; {measured[-1]:,} / {measured[0]:,} entries = {growth:.2f}x",
                )
            )
    measured = [
        n
        for n in sizes
        if ("cold_start", "jsonl", n) in index and ("cold_start", JSONL_FLOOR, n) in index
    ]
    if measured:
        ratios = {
            n: index[("cold_start", "jsonl", n)].value / index[("cold_start", JSONL_FLOOR, n)].value
            for n in measured
        }
        judged = [n for n in measured if n >= 100_000]
        detail = ", ".join(
            f"{n:,}: {fmt_value(index[('cold_start', 'jsonl', n)].value, 's')} = {r:.2f}x "
            f"of {fmt_value(index[('cold_start', JSONL_FLOOR, n)].value, 's')}"
            for n, r in ratios.items()
        )
        targets.append(
            Target(
                "JSONL reopen ≤ 1.5x reading the file + json.loads per line (≥ 100,000 entries)",
                all(ratios[n] <= 1.5 for n in judged) if judged else None,
                detail,
            )
        )
    return targets


def _floor_targets(index: dict[tuple[str, str, int], Result], sizes: list[int]) -> list[Target]:
    """branch() within 1.2x of its floor and no slower than SQLiteSession.get_items();
    reopen + leaf + recent 20 within 3x of its floor."""
    targets = []
    for key, label, bound, peer in (
        ("branch", "branch() within 1.2x of its floor and ≤1.0x SQLiteSession", 1.2, True),
        ("cold_start", "reopen + leaf + recent 20 within 3x of its floor", 3.0, False),
    ):
        parts, ok = [], True
        for n in sizes:
            if (key, "sqlite", n) in index and (key, FLOOR, n) in index:
                ours = index[(key, "sqlite", n)].value
                ratio = ours / index[(key, FLOOR, n)].value
                ok &= ratio <= bound
                part = f"{n:,}: {ratio:.2f}x floor"
                if peer and (key, "SQLiteSession", n) in index:
                    versus = ours / index[(key, "SQLiteSession", n)].value
                    ok &= versus <= 1.0
                    part += f", {versus:.2f}x SQLiteSession"
                parts.append(part)
        targets.append(Target(f"SQLite {label}", ok if parts else None, "; ".join(parts)))
    return targets


def machine_lines() -> list[str]:
    """CPU, memory, Python, SQLite and peer versions of this machine."""
    cpu, cores, mem = platform.processor() or "unknown", os.cpu_count(), "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                    break
    except OSError:
        pass
    versions = []
    for dist in (
        "prism-om",
        "aiosqlite",
        "openai-agents",
        "langgraph-checkpoint-sqlite",
        "om-memory",
    ):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    return [
        f"- CPU: {cpu}, {cores} logical cores",
        f"- Memory: {mem}",
        f"- OS: {platform.platform()}",
        f"- Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}",
        f"- Packages: {', '.join(versions)}",
    ]


FINDINGS_HEADING = "## Findings kept from one-off measurements"


def kept_findings(existing: str) -> str | None:
    """The hand-written findings section of an earlier report, to carry into the next one.

    What one-off measurements proved does not come from a run, so regenerating the docs
    must not drop it.
    """
    start = existing.find(FINDINGS_HEADING)
    if start < 0:
        return None
    end = existing.find("\n## ", start + len(FINDINGS_HEADING))
    return existing[start : end if end >= 0 else None].rstrip("\n")


def markdown_report(
    results: Sequence[Result],
    info: RunInfo,
    targets: Sequence[Target],
    plot_path: str | None,
    findings: str | None = None,
) -> str:
    """The whole report: run, machine, targets, tables, notes (and ``findings``, kept)."""
    lines = [
        "# prism-om benchmarks",
        "",
        f"Command: `{info.command}`  ",
        f"Wall time: {info.seconds / 60:.1f} min; sizes {', '.join(f'{s:,}' for s in info.sizes)};"
        f" {info.repeat} samples per median. Recall path: `{info.recall_path}`.",
        "",
        "## Machine",
        "",
        *machine_lines(),
        "",
        "## Targets",
        "",
        "| target | verdict | detail |",
        "|---|---|---|",
        *(f"| {t.name} | {t.verdict} | {t.detail} |" for t in targets),
        "",
        "## Results",
        "",
        "Medians; ratios are ours divided by the other (below 1 is faster), one per size.",
        "",
        tables(results, info.sizes),
    ]
    if plot_path:
        lines += ["## Scaling", "", f"![time versus entries]({plot_path})", ""]
    if info.notes:
        lines += ["## Notes", "", *(f"- {n}" for n in info.notes), ""]
    if findings:
        lines += [findings, ""]
    return "\n".join(lines)


def plot_scaling(results: Sequence[Result], path: str) -> None:
    """Time (or memory) versus entries, log-log, one panel per workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in WORKLOADS if k != "rtt" and any(r.workload == k for r in results)]
    cols = 3
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(13, 3.3 * rows), squeeze=False)
    rtt = sorted(
        (r.size, r.value) for r in results if r.workload == "rtt" and r.system == REFERENCE
    )
    styles = (
        {s: ("-", "o") for s in OURS}
        | {FLOOR: (":", "s"), PG_FLOOR: (":", "D")}
        | {p: ("--", "^") for p in PEERS}
    )
    for ax, key in zip(axes.flat, keys, strict=False):
        for system in _systems(results, key):
            points = sorted(
                (r.size, r.value) for r in results if r.workload == key and r.system == system
            )
            line, marker = styles.get(system, ("-", "."))
            label = f"prism-om {system}" if system in OURS else system
            ax.plot(
                [p[0] for p in points], [p[1] for p in points], line, marker=marker, label=label
            )
        if key in ("page20", "page20_raw", "recall") and rtt:
            ax.plot(
                [p[0] for p in rtt],
                [p[1] for p in rtt],
                color="grey",
                linewidth=0.8,
                linestyle="-.",
                label="aiosqlite round trip",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(WORKLOADS[key].title, fontsize=9)
        ax.set_xlabel("entries", fontsize=8)
        ax.set_ylabel(
            "bytes" if key == "peak_rss" else f"seconds per {WORKLOADS[key].per}", fontsize=8
        )
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", linewidth=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=70)
    plt.close(fig)
