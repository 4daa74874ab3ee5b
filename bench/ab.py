"""``python -m bench.ab``: one workload of this tree beside an older revision, interleaved.

    python -m bench.ab --rev REV --workload page|recall|append [--adapter sqlite|postgres]
                       [--sizes 10000] [--rounds 15] [--busy]

REV's ``prism_om`` (``git archive``) is imported as ``prism_om_old`` (the package imports
itself relatively), so both versions run in one process on the bench transcript
(``bench.data``), built by this tree. ``page`` (the public page of 20, cursor in the
middle) and ``recall`` (the public recall by id) open a store of each version on the
same file or schema; ``append`` (``append_many`` of 100 new messages) gives each version
a store of its own holding the same rows. Each round times a block of each arm (the
driver's ``SELECT 1`` round trip for the reads, new, old), the arm going first rotating
(``bench.paired.interleaved``), so a loaded machine slows all alike. Printed: medians of
wall and CPU time per call, each version's ratio to its round's round trip and new/old
per round (medians and quartiles). ``--busy`` keeps the second core busy meanwhile. Both
versions must read the schema this tree writes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from .data import SESSION_ID, Dataset, build_dataset, continuation
from .floor import aiosqlite_round_trips, busy_core
from .paired import PAIRED_ROUNDS, AsyncFn, interleaved, ratios

ROOT = Path(__file__).resolve().parents[1]
OLD = "prism_om_old"
BATCH = 100
# Appends change the store, so their block is a fixed count of batches, not a time.
APPEND_CALLS = 5


def import_old(rev: str, into: str) -> None:
    """Make the package as of ``rev`` importable as ``prism_om_old``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "prism_om", "schema.sql"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    os.rename(os.path.join(into, "prism_om"), os.path.join(into, OLD))
    sys.path.insert(0, into)


async def build(url: str, dataset: Dataset) -> None:
    from prism_om.stores import open_store

    async with await open_store(url) as store:
        for i in range(0, dataset.size, 1000):
            await store.append_many(dataset.entries[i : i + 1000])


def _batches(dataset: Dataset, package: str, count: int) -> list[list[Any]]:
    """``count`` batches continuing the branch, as ``package``'s own entry objects."""
    entry_type = importlib.import_module(f"{package}.entries").SessionEntry
    extra = continuation(dataset, count * BATCH, "ab")
    return [
        [entry_type.model_validate_json(e.to_json()) for e in extra[i : i + BATCH]]
        for i in range(0, len(extra), BATCH)
    ]


def version_call(
    package: str, store: Any, workload: str, dataset: Dataset, batches: int
) -> AsyncFn:
    """One call of ``workload`` by ``package``'s code on its own ``store``."""
    om = importlib.import_module(f"{package}.observational_memory")
    cursor = dataset.middle_message_id()
    memory_id, _ = dataset.middle_memory_id()
    if workload == "page":
        return lambda: om.recall_observational_memory_branch_page(
            store, cursor, session_id=SESSION_ID, limit=20
        )
    if workload == "recall":
        return lambda: om.recall_observational_memory(store, memory_id, session_id=SESSION_ID)
    left = iter(_batches(dataset, package, batches))
    return lambda: store.append_many(next(left))


@contextlib.asynccontextmanager
async def stores_and_trip(
    args: argparse.Namespace, base: str, size: int, dataset: Dataset, workdir: str
) -> AsyncIterator[tuple[dict[str, Any], AsyncFn | None]]:
    """A store per version (on one file or schema for reads, copies for appends) and the
    driver round trip (None for appends)."""
    from prism_om.testing.postgres_cluster import with_fresh_schema

    reads = args.workload != "append"
    if args.adapter == "sqlite":
        first = os.path.join(workdir, f"ab-{size}.db")
        await build(f"sqlite:{first}", dataset)
        paths = {"new": first, "old": first}
        if not reads:
            paths["old"] = shutil.copyfile(first, os.path.join(workdir, f"ab-{size}-old.db"))
        urls = {name: f"sqlite:{path}" for name, path in paths.items()}
    else:
        urls = {"new": with_fresh_schema(base, f"ab_{size}_{os.getpid()}")}
        urls["old"] = (
            urls["new"] if reads else with_fresh_schema(base, f"ab_{size}_old_{os.getpid()}")
        )
        for url in dict.fromkeys(urls.values()):
            await build(url, dataset)
    opened: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        for name, package in (("new", "prism_om"), ("old", OLD)):
            stores = importlib.import_module(f"{package}.stores")
            opened[name] = await stack.enter_async_context(await stores.open_store(urls[name]))
        trip: AsyncFn | None = None
        if reads and args.adapter == "sqlite":
            trip = (await stack.enter_async_context(aiosqlite_round_trips(workdir)))[0].call
        elif reads:
            from .pg import psycopg_round_trips

            trip = (await stack.enter_async_context(psycopg_round_trips(urls["new"])))[0].call
        yield opened, trip


def _spread(values: Sequence[float]) -> str:
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.3f} (quartiles {q1:.3f} .. {q3:.3f})"


async def one_size(args: argparse.Namespace, base: str, size: int, workdir: str) -> None:
    dataset = build_dataset(size)
    async with stores_and_trip(args, base, size, dataset, workdir) as (stores, trip):
        batches = args.rounds * APPEND_CALLS + 1
        arms = {
            name: version_call(package, stores[name], args.workload, dataset, batches)
            for name, package in (("new", "prism_om"), ("old", OLD))
        }
        if trip is not None:
            arms = {"rtt": trip, **arms}
        calls = APPEND_CALLS if args.workload == "append" else None
        found = await interleaved(arms, args.rounds, calls=calls)
    print(
        f"{args.adapter} {args.workload}, {size:,} entries, {args.rounds} rounds (old = {args.rev})"
    )
    for name, arm in found.items():
        line = f"  {name:<4} wall {statistics.median(arm.wall) * 1e6:9.1f} µs"
        line += f"  cpu {statistics.median(arm.cpu) * 1e6:9.1f} µs"
        if "rtt" in found and name != "rtt":
            line += f"  {statistics.median(ratios(arm, found['rtt'])):5.2f}x rtt"
        print(line)
    new, old = found["new"], found["old"]
    print(f"  new/old wall {_spread(ratios(new, old))}")
    print(f"  new/old cpu  {_spread([n / o for n, o in zip(new.cpu, old.cpu, strict=True)])}")


async def main_async(args: argparse.Namespace, base: str) -> None:
    workdir = tempfile.mkdtemp(prefix="prism-ab-")
    try:
        import_old(args.rev, workdir)
        for size in args.sizes:
            await one_size(args, base, size, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("--rev", required=True, help="the older revision (any git rev)")
    parser.add_argument("--workload", choices=("page", "recall", "append"), required=True)
    parser.add_argument("--adapter", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--sizes", default="10000", help="entry counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=PAIRED_ROUNDS)
    parser.add_argument("--busy", action="store_true", help="keep the second core busy")
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",")]
    with contextlib.ExitStack() as stack:
        if args.busy:
            stack.enter_context(busy_core())
        base = ""
        if args.adapter == "postgres":
            from .pg import postgres_server

            base = stack.enter_context(postgres_server())
        asyncio.run(main_async(args, base))


if __name__ == "__main__":
    main()
