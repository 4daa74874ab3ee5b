"""``python -m bench``: run the workloads, print the table, write the report and the plot."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from functools import partial

from .data import build_dataset, continuation
from .floor import aiosqlite_round_trips, run_floor
from .model import DEFAULT_ADAPTERS, OURS, PEERS, Result
from .peers import NETWORK_ATTEMPTS, PEER_RUNNERS, no_network
from .report import (
    RunInfo,
    check_targets,
    kept_findings,
    markdown_report,
    plot_scaling,
    tables,
)
from .timing import Timer
from .workloads import AppendSample, resolve_recall, run_adapter

DEFAULT_SIZES = (10_000, 100_000)
LARGE_SIZE = 1_000_000
SINGLE_APPENDS = 2_000
BATCHES = 20


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in DEFAULT_SIZES),
        help="entry counts, comma-separated (default: 10000,100000)",
    )
    parser.add_argument("--large", action="store_true", help="also run 1,000,000 (minutes)")
    parser.add_argument("--repeat", type=int, default=5, help="samples per median (default 5)")
    parser.add_argument(
        "--adapters",
        default=",".join(DEFAULT_ADAPTERS),
        help="memory,jsonl,sqlite (default); postgres starts a throwaway cluster",
    )
    parser.add_argument(
        "--peers", default=",".join(PEERS), help="peers to run, or 'none' (default: all)"
    )
    parser.add_argument("--out", default="bench/results", help="report directory")
    parser.add_argument(
        "--docs", default=None, help="also write benchmarks.md and the plot into this directory"
    )
    parser.add_argument("--workdir", default=None, help="where stores are built (default: tmp)")
    return parser.parse_args(argv)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def run(args: argparse.Namespace, workdir: str) -> tuple[list[Result], list[str], str]:
    adapters = [a for a in _csv(args.adapters) if a in OURS]
    if "postgres" not in adapters:
        return await _run(args, workdir, None)
    from .pg import postgres_server

    with postgres_server() as base_url:
        log(f"PostgreSQL server: {base_url}")
        return await _run(args, workdir, base_url)


async def _run(
    args: argparse.Namespace, workdir: str, pg_base: str | None
) -> tuple[list[Result], list[str], str]:
    sizes = sorted({int(s.replace("_", "")) for s in _csv(args.sizes)})
    if args.large and LARGE_SIZE not in sizes:
        sizes.append(LARGE_SIZE)
    adapters = [a for a in _csv(args.adapters) if a in OURS]
    peers = [] if args.peers == "none" else [p for p in _csv(args.peers) if p in PEER_RUNNERS]
    timer = Timer(repeat=args.repeat)
    recall = resolve_recall()
    results: list[Result] = []
    notes: list[str] = []
    failed: set[str] = set()
    for size in sizes:
        started = time.perf_counter()
        log(f"{size:,} entries: generating")
        dataset = build_dataset(size)
        extra = continuation(dataset, BATCHES * 100 + SINGLE_APPENDS, "x")
        batches = [extra[i * 100 : (i + 1) * 100] for i in range(BATCHES)]
        sample = AppendSample(batches, extra[BATCHES * 100 :])
        pg_url = None
        if pg_base is not None:
            from prism_om.testing.postgres_cluster import with_fresh_schema

            from .pg import run_pg_floor

            pg_url = with_fresh_schema(pg_base, f"bench_{size}_{os.getpid()}")
        for adapter in adapters:
            trips = None
            if adapter == "sqlite":
                trips = partial(aiosqlite_round_trips, workdir)
            elif adapter == "postgres":
                from .pg import psycopg_round_trips

                assert pg_url is not None
                trips = partial(psycopg_round_trips, pg_url)
            results += await run_adapter(
                adapter,
                dataset,
                sample,
                workdir,
                timer,
                recall,
                log,
                round_trips=trips,
                url=pg_url if adapter == "postgres" else None,
            )
        if any(a != "postgres" for a in adapters) or not adapters:
            results += await run_floor(dataset, sample, workdir, timer)
            log("  floor done")
        if pg_base is not None:
            floor_url = with_fresh_schema(pg_base, f"floor_{size}_{os.getpid()}")
            results += await run_pg_floor(floor_url, dataset, sample, timer)
            log("  postgres floor done")
        for peer in peers:
            if peer in failed:
                continue
            try:
                with no_network():
                    results += await PEER_RUNNERS[peer](dataset, sample, workdir, timer)
                log(f"  {peer} done")
            except Exception as exc:  # a peer's failure is reported, never fatal
                failed.add(peer)
                detail = "".join(traceback.format_exception_only(exc)).strip()
                notes.append(f"{peer} failed at {size:,} entries and was skipped: {detail}")
                log(f"  {peer} FAILED: {detail}")
        log(f"{size:,} entries: {time.perf_counter() - started:.0f} s")
        del dataset, extra, sample
    notes.append(
        f"Socket connections attempted by peers: {len(NETWORK_ATTEMPTS)}"
        + (
            f" ({', '.join(NETWORK_ATTEMPTS[:5])})"
            if NETWORK_ATTEMPTS
            else " (none: no request made)"
        )
    )
    return results, notes, recall[0]


STANDING_NOTES = [
    "One session, one branch: every 51st entry is an `om.observations.recorded` record "
    "with one observation citing one of the 50 messages before it; message text is 6-30 "
    "words. Peers get the same messages (om-memory also the same observations).",
    "The capped session (SQLite only) is the same transcript with three observations per "
    "record (~16x compression, inside the published 5-40x) and a dropped record whenever the "
    "live pool passes the dropper's target, back to three quarters of it: the pool is near "
    "the target at every size (`bench.data.capped_entries`).",
    "Appends are a fixed sample on top of the prepared store: 20 batches of 100, then 2,000 "
    "single entries (om-memory: as many as fit in 10 s); the figure is the median of 5 "
    "group means.",
    "Durability as shipped: prism-om SQLite and the floor run WAL with synchronous=NORMAL; "
    "SQLiteSession runs WAL with SQLite's default synchronous=FULL; AsyncSqliteSaver and "
    "om-memory use a rollback journal (no WAL); the JSONL store fsyncs every append.",
    "AsyncSqliteSaver stores one message per checkpoint (its most favourable shape; a graph "
    "state holds the whole list) and is prepared with its own serializer and INSERT.",
    "om-memory runs with observation and reflection off (thresholds above the workload) and "
    "a provider that raises if called; its `aget_context` and `aadd_message` read every "
    "message of the thread, since nothing is ever compressed away.",
    "Reads use a warm OS page cache; cold start reopens a file that was just written.",
]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    command = "python -m bench " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    started = time.perf_counter()
    workdir = args.workdir or tempfile.mkdtemp(prefix="prism-bench-")
    os.makedirs(workdir, exist_ok=True)
    try:
        results, notes, recall_path = asyncio.run(run(args, workdir))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.perf_counter() - started
    sizes = sorted({r.size for r in results if r.size})
    info = RunInfo(
        command.strip(), seconds, sizes, args.repeat, recall_path, STANDING_NOTES + notes
    )
    targets = check_targets(results, sizes)
    print(tables(results, sizes))
    for target in targets:
        print(f"[{target.verdict}] {target.name}: {target.detail}")
    print(f"total wall time {seconds:.0f} s")

    os.makedirs(args.out, exist_ok=True)
    plot: str | None = os.path.join(args.out, "scaling.png")
    try:
        plot_scaling(results, plot)
    except ImportError:
        # The plot needs the bench extra; the tables and the report do not.
        log("no plot: matplotlib is missing (pip install -e '.[bench]')")
        plot = None
    image = "scaling.png" if plot else None
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(markdown_report(results, info, targets, image))
    if args.docs:
        os.makedirs(args.docs, exist_ok=True)
        if plot:
            shutil.copyfile(plot, os.path.join(args.docs, "benchmarks-scaling.png"))
        docs = os.path.join(args.docs, "benchmarks.md")
        findings = None
        if os.path.exists(docs):
            with open(docs) as f:
                findings = kept_findings(f.read())
        with open(docs, "w") as f:
            image = "benchmarks-scaling.png" if plot else None
            f.write(markdown_report(results, info, targets, image, findings))
    log(f"wrote {args.out}/report.md" + (f" and {plot}" if plot else ""))


if __name__ == "__main__":
    main()
