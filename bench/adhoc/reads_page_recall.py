"""A/B of the SQLite public page of 20 and recall by id: the code at a base commit beside
this checkout's, in one process, on copies of one file.

The base commit's ``prism_om`` is extracted with ``git archive`` into a temporary
directory as ``prism_om_base`` (its few absolute imports rewritten), so both versions
run side by side: rounds alternate base / new / base / ... and each round times a batch
of calls of every workload (and the aiosqlite ``SELECT 1`` round trip the targets are
ratios of, and openai-agents' ``SQLiteSession.get_items(limit=20)`` when installed).
Prints the medians over the rounds of the per-call wall time and of the
process CPU time (which counts the reader threads' work too). The machine may be loaded
by other work: compare the columns of one run, not figures across runs.

    python bench/adhoc/reads_page_recall.py [--base REV] [--entries N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.data import SESSION_ID, build_dataset  # noqa: E402

BASE = "0629349"  # main when this round's reads work started
WORKLOADS = ("page20", "page20_raw", "recall")


def extract_base(rev: str, into: Path) -> None:
    """``prism_om`` at ``rev`` as the package ``prism_om_base`` under ``into``."""
    archive = into / "base.tar"
    with archive.open("wb") as out:
        subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "prism_om", "schema.sql"],
            stdout=out,
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    package = into / "prism_om_base"
    (into / "prism_om").rename(package)
    for path in package.rglob("*.py"):
        text = path.read_text()
        fixed = re.sub(r"\bprism_om\.", "prism_om_base.", text)
        if fixed != text:
            path.write_text(fixed)
    sys.path.insert(0, str(into))


async def per_call(call: Callable[[], Awaitable[object]], calls: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await call()
    return (
        (time.perf_counter() - wall) / calls * 1e6,
        (time.process_time() - cpu) / calls * 1e6,
    )


async def main(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="reads-ab-"))
    try:
        extract_base(args.base, work)
        versions = {"base": importlib.import_module("prism_om_base"), "new": None}
        versions["new"] = importlib.import_module("prism_om")
        data = build_dataset(args.entries)
        stores_mod = importlib.import_module("prism_om.stores")
        built = work / "new.db"
        async with await stores_mod.open_store(f"sqlite:{built}") as store:
            for start in range(0, len(data.entries), 1000):
                await store.append_many(data.entries[start : start + 1000])
        shutil.copy(built, work / "base.db")
        cursor = data.middle_message_id()
        memory_id, _ = data.middle_memory_id()

        workloads: dict[str, dict[str, Callable[[], Awaitable[object]]]] = {}
        opened: list[Any] = []
        for name, package in versions.items():
            stores = importlib.import_module(f"{package.__name__}.stores")
            om = importlib.import_module(f"{package.__name__}.observational_memory")
            store = await stores.open_store(f"sqlite:{work / name}.db")
            opened.append(store)

            def bind(store: Any = store, om: Any = om) -> dict[str, Any]:
                return {
                    "page20": lambda: om.recall_observational_memory_branch_page(
                        store, cursor, session_id=SESSION_ID, limit=20
                    ),
                    "page20_raw": lambda: store.page_messages(SESSION_ID, cursor, 20, "forward"),
                    "recall": lambda: om.recall_observational_memory(
                        store, memory_id, session_id=SESSION_ID
                    ),
                }

            workloads[name] = bind()
        round_trip = await aiosqlite.connect(work / "new.db")
        peer = await sqlite_session(data, work)
        try:
            await measure(args, workloads, round_trip, peer)
        finally:
            await round_trip.close()
            for store in opened:
                await store.close()
            if peer is not None:
                peer.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def sqlite_session(data: Any, work: Path) -> Any:
    """openai-agents' ``SQLiteSession`` with the same messages (the bench's peer), if installed."""
    try:
        from agents import SQLiteSession
    except ImportError:
        return None
    from bench.peers import _item

    session = SQLiteSession(SESSION_ID, str(work / "agents.db"))
    items = [_item(e) for e in data.messages]
    for start in range(0, len(items), 1000):
        await session.add_items(items[start : start + 1000])
    return session


async def measure(args: argparse.Namespace, workloads: Any, round_trip: Any, peer: Any) -> None:
    async def select_one() -> object:
        return await round_trip.execute_fetchall("SELECT 1")

    async def peer_page() -> object:
        return await peer.get_items(limit=20)

    # Both versions must answer the same before they are timed.
    for workload in WORKLOADS:
        answers = [await workloads[v][workload]() for v in ("base", "new")]
        shown = [
            a.to_json() if hasattr(a, "to_json") else [e.to_json() for e in a[0]] for a in answers
        ]
        if shown[0] != shown[1]:
            raise SystemExit(f"{workload}: base and new answers differ")

    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    order = ["base", "new"]
    for round_no in range(args.rounds):
        samples.setdefault(("round trip", "-"), []).append(await per_call(select_one, args.calls))
        if peer is not None:
            samples.setdefault(("peer", "-"), []).append(await per_call(peer_page, args.calls))
        for version in order if round_no % 2 == 0 else reversed(order):
            for workload in WORKLOADS:
                timed = await per_call(workloads[version][workload], args.calls)
                samples.setdefault((workload, version), []).append(timed)

    def med(key: tuple[str, str], part: int) -> float:
        return statistics.median(s[part] for s in samples[key])

    trip = med(("round trip", "-"), 0)
    print(
        f"{args.entries:,} entries, {args.rounds} rounds of {args.calls} calls, "
        f"base {args.base}; aiosqlite SELECT 1: {trip:.1f} µs wall, "
        f"{med(('round trip', '-'), 1):.1f} µs CPU"
    )
    if peer is not None:
        print(
            f"SQLiteSession get_items(limit=20): {med(('peer', '-'), 0):.1f} µs wall, "
            f"{med(('peer', '-'), 1):.1f} µs CPU"
        )
    print(
        f"{'workload':<12} {'base wall':>10} {'new wall':>10} {'new/base':>9} "
        f"{'base CPU':>9} {'new CPU':>9} {'new / RT':>9}"
    )
    for workload in WORKLOADS:
        bw, nw = med((workload, "base"), 0), med((workload, "new"), 0)
        bc, nc = med((workload, "base"), 1), med((workload, "new"), 1)
        print(
            f"{workload:<12} {bw:>8.1f}µs {nw:>8.1f}µs {nw / bw:>8.2f}x "
            f"{bc:>7.1f}µs {nc:>7.1f}µs {nw / trip:>8.2f}x"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=BASE, help="the commit to compare with")
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=300)
    asyncio.run(main(parser.parse_args()))
