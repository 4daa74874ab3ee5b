"""The bench's JSONL recall and page at 10k and 100k: wall and CPU time, calls, lines parsed.

Usage: python bench/adhoc/jsonl_read_flatness.py [--sizes 10000,100000] [--calls N]
[--burners K]

Builds each session exactly as ``python -m bench`` does (``bench.data``, ``append_many`` in
``BUILD_BATCH`` batches, reads on the store that built it) and prints, per workload and
size: median wall (``perf_counter``) and CPU (``process_time``) time per call over 7 samples,
and the Python + C function calls and lines parsed (``entry_from_wire``) of one call, on
every thread. ``--burners K`` keeps K busy-looping processes running meanwhile, to show how
a loaded 2-core machine moves wall time (each JSONL read hops to a worker thread and back)
while CPU time and work stay put.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

from bench.data import SESSION_ID, build_dataset
from bench.workloads import BUILD_BATCH
from prism_om.entries import SessionEntry, entry_from_wire
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import jsonl, open_store

_counting = False
_calls: dict[int, int] = {}
_parsed = [0]


def _hook(frame: FrameType, event: str, arg: Any) -> None:
    if _counting and event in ("call", "c_call"):
        tid = threading.get_ident()
        _calls[tid] = _calls.get(tid, 0) + 1


def _parse(wire: object, *, where: str = "entry") -> SessionEntry:
    if _counting:
        _parsed[0] += 1
    return entry_from_wire(wire, where=where)


async def _count(fn: Callable[[], Awaitable[object]]) -> tuple[int, int]:
    global _counting
    _calls.clear()
    _parsed[0] = 0
    _counting = True
    try:
        await fn()
    finally:
        _counting = False
    return sum(_calls.values()), _parsed[0]


async def _median(fn: Callable[[], Awaitable[object]], calls: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(7):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            await fn()
        walls.append((time.perf_counter() - wall) / calls)
        cpus.append((time.process_time() - cpu) / calls)
    return sorted(walls)[3], sorted(cpus)[3]


async def run(size: int, calls: int, count: bool) -> None:
    dataset = build_dataset(size)
    with tempfile.TemporaryDirectory() as workdir:
        store = await open_store(f"jsonl:{workdir}/jsonl-{size}")
        try:
            for i in range(0, size, BUILD_BATCH):
                await store.append_many(dataset.entries[i : i + BUILD_BATCH])
            cursor = dataset.middle_message_id()
            memory_id, _ = dataset.middle_memory_id()

            async def page() -> object:
                return await recall_observational_memory_branch_page(
                    store, cursor, session_id=SESSION_ID, limit=20
                )

            async def recall() -> object:
                return await recall_observational_memory(store, memory_id, session_id=SESSION_ID)

            for name, fn in (("page20", page), ("recall", recall)):
                await fn()
                if count:
                    made, parsed = await _count(fn)
                    print(f"{name:7} {size:>9,}: calls {made:5}  lines parsed {parsed}")
                    continue
                gc.collect()
                wall, cpu = await _median(fn, calls)
                print(f"{name:7} {size:>9,}: wall {wall * 1e6:7.1f} µs  cpu {cpu * 1e6:7.1f} µs")
        finally:
            await store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--burners", type=int, default=0)
    args = parser.parse_args()
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)
    ]
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        for size in sizes:
            asyncio.run(run(size, args.calls, count=False))
        # Counted apart: the profile hook would slow the timed calls. A new loop's
        # executor threads start after threading.setprofile, so they count too.
        jsonl.entry_from_wire = _parse  # type: ignore[attr-defined]
        threading.setprofile(_hook)
        sys.setprofile(_hook)
        for size in sizes:
            asyncio.run(run(size, args.calls, count=True))
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


if __name__ == "__main__":
    main()
