"""Per-append cost of ``Session.append_message`` (at the leaf, resolved in the write lock)
beside ``store.append`` naming the parent, at two transcript lengths, on every adapter.

``python bench/adhoc/write_figures.py`` (``--entries N`` for the long session's length).
The two lengths should cost the same: an append never reads the branch.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from prism_om.entries import message_entry
from prism_om.session import Session
from prism_om.stores import open_store

APPENDS = 200


async def figures(url: str, length: int) -> tuple[float, float, float]:
    store = await open_store(url)
    try:
        sid = f"s{length}"
        first = message_entry(sid, "user", "start", parent_id=None)
        batch = [first]
        for n in range(1, length):
            batch.append(message_entry(sid, "user", f"m{n}", parent_id=batch[-1].id))
        await store.append_many(batch)
        session = Session(store, sid)
        at_leaf, named = [], []
        for n in range(APPENDS):
            started = time.perf_counter()
            await session.append_message("user", f"turn {n}")
            at_leaf.append(time.perf_counter() - started)
            parent = await store.leaf(sid)
            entry = message_entry(sid, "assistant", f"reply {n}", parent_id=parent)
            started = time.perf_counter()
            await store.append(entry)
            named.append(time.perf_counter() - started)
        head = time.perf_counter()
        for _ in range(APPENDS):
            await store.memory_head(sid)
        per_head = (time.perf_counter() - head) / APPENDS
        return statistics.median(at_leaf), statistics.median(named), per_head
    finally:
        await store.close()


async def main(entries: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("memory", "jsonl", "sqlite"):
            for length in (1_000, entries):
                url = {
                    "memory": "memory:",
                    "jsonl": f"jsonl:{tmp}/j{length}",
                    "sqlite": f"sqlite:{tmp}/s{length}.db",
                }[kind]
                at_leaf, named, head = await figures(url, length)
                print(
                    f"{kind:6} {length:>7} entries: append_message {at_leaf * 1e3:.3f} ms, "
                    f"append(parent) {named * 1e3:.3f} ms, memory_head {head * 1e3:.3f} ms "
                    f"(medians of {APPENDS})"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=50_000)
    asyncio.run(main(parser.parse_args().entries))
