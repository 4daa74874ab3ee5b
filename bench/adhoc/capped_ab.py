"""A/B of ``ledger()`` + context blocks on the bench's capped session (issue 16).

The old code is an exported copy of the package at ``--old-ref`` (imported as
``prism_om_old``: the package imports itself relatively), so both versions run in ONE
process on the same SQLite file, call by call alternating which goes first. Each variant
is sampled ``--rounds`` times (a sample = ``--inner`` calls); the table gives the median
wall and CPU time per call (CPU is the whole process's, so it counts the reader thread).

``new, cold memo`` clears the default estimator's line memo before every call: the cost
of counting the blocks with nothing remembered (the new code caches no rendered block).

    python -m bench.adhoc.capped_ab --size 100000 --old-ref 0629349
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prism_om.observational_memory import build_observational_memory_context_blocks
from prism_om.stores import open_store
from prism_om.tokens import get_estimator

from ..data import SESSION_ID, build_dataset, capped_entries

Call = Callable[[], Awaitable[Any]]


def import_old(ref: str, into: str) -> Any:
    """The package as it was at ``ref``, importable as ``prism_om_old``."""
    archive = subprocess.run(
        ["git", "archive", ref, "prism_om", "schema.sql"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    os.rename(os.path.join(into, "prism_om"), os.path.join(into, "prism_om_old"))
    sys.path.insert(0, into)
    return importlib.import_module("prism_om_old")


async def build(path: str, size: int) -> None:
    entries = capped_entries(build_dataset(size))
    async with await open_store(f"sqlite:{path}") as store:
        for i in range(0, len(entries), 10_000):
            await store.append_many(entries[i : i + 10_000])


async def sample(call: Call, inner: int, before: Callable[[], None] | None) -> tuple[float, float]:
    wall = cpu = 0.0
    for _ in range(inner):
        if before is not None:
            before()
        w, c = time.perf_counter(), time.process_time()
        await call()
        wall += time.perf_counter() - w
        cpu += time.process_time() - c
    return wall / inner, cpu / inner


async def run(args: argparse.Namespace, old: Any) -> None:
    path = args.db
    if not args.reuse:
        await build(path, args.size)
    old_stores = importlib.import_module("prism_om_old.stores")
    old_om = importlib.import_module("prism_om_old.observational_memory")
    memo = get_estimator()._line_memo
    async with (
        await open_store(f"sqlite:{path}") as new_store,
        await old_stores.open_store(f"sqlite:{path}") as old_store,
    ):
        live = len((await new_store.live_ledger(SESSION_ID)).observations)
        size = await new_store.entry_count(SESSION_ID)

        async def new() -> Any:
            return await build_observational_memory_context_blocks(new_store, session_id=SESSION_ID)

        async def before() -> Any:
            return await old_om.build_observational_memory_context_blocks(
                old_store, session_id=SESSION_ID
            )

        same = [b.text for b in await new()] == [b.text for b in await before()]
        cold = memo.clear if memo is not None else None
        variants: list[tuple[str, Call, Callable[[], None] | None]] = [
            ("old", before, None),
            ("new", new, None),
            ("new, cold memo", new, cold),
        ]
        for _, call, _ in variants:
            for _ in range(5):
                await call()
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in variants}
        for n in range(args.rounds):
            order = variants if n % 2 == 0 else variants[::-1]
            for name, call, hook in order:
                samples[name].append(await sample(call, args.inner, hook))
    print(f"{size:,} entries: {live} live observations; old and new blocks equal: {same}")
    base = statistics.median(w for w, _ in samples["old"])
    for name, got in samples.items():
        wall = statistics.median(w for w, _ in got)
        cpu = statistics.median(c for _, c in got)
        per = wall * 1e6 / max(live, 1)
        print(
            f"  {name:15s} wall {wall * 1e3:7.3f} ms  cpu {cpu * 1e3:7.3f} ms  "
            f"{per:5.1f} us/live obs  {base / wall:4.2f}x old"
        )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.adhoc.capped_ab")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--db", help="an existing capped-session file to reuse")
    parser.add_argument("--old-ref", default="0629349")
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--inner", type=int, default=10)
    args = parser.parse_args()
    args.db = args.db or os.path.join(tempfile.gettempdir(), f"capped-ab-{args.size}.db")
    args.reuse = os.path.exists(args.db)
    with tempfile.TemporaryDirectory() as into:
        old = import_old(args.old_ref, into)
        asyncio.run(run(args, old))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
