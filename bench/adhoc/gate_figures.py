"""The compaction gate's per-turn estimate on SQLite sessions of growing length.

``python bench/adhoc/gate_figures.py [N ...]`` builds a session of N messages (default
1,000, 10,000 and 100,000), attaches observational memory, and prints the median time of
``next_request_tokens()`` (what the token gates read after every turn) with context blocks
(the default) and passive (the agent replays summary + kept + messages since the latest
compaction, which sits 40 messages before the leaf).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from prism_om import Agent, ScriptedProvider, Session, create_observational_memory, open_store
from prism_om.entries import compaction_entry, message_entry
from prism_om.workers import OfflineMemoryProvider


async def build(path: Path, count: int) -> None:
    async with await open_store(f"sqlite:{path}") as store:
        batch, parent = [], None
        for n in range(count):
            role = "user" if n % 2 == 0 else "assistant"
            entry = message_entry(
                "s", role, f"Message {n}: build {n} ships on day {n % 28 + 1}.", parent_id=parent
            )
            if n == count - 40:
                entry = compaction_entry(
                    "s",
                    "summary of the earlier turns",
                    {"keepEntryIds": [parent]},
                    parent_id=parent,
                )
            batch.append(entry)
            parent = entry.id
            if len(batch) == 10_000:
                await store.append_many(batch)
                batch = []
        if batch:
            await store.append_many(batch)


async def measure(path: Path, passive: bool) -> float:
    async with await open_store(f"sqlite:{path}") as store:
        agent = Agent(
            Session(store, "s"), ScriptedProvider(), system="You are a release assistant."
        )
        waiting = {"provider": OfflineMemoryProvider(), "model": "offline", "message_tokens": 10**9}
        attached = create_observational_memory({"observation": waiting, "passive": passive}).attach(
            agent
        )
        await attached.next_request_tokens()  # warm caches, as a running session has
        times = []
        for _ in range(15):
            start = time.perf_counter()
            await attached.next_request_tokens()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000


async def main(sizes: list[int]) -> None:
    print(f"{'messages':>9} {'blocks ms':>10} {'passive ms':>11}")
    for count in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "gate.db"
            await build(path, count)
            blocks = await measure(path, passive=False)
            passive = await measure(path, passive=True)
            print(f"{count:>9,} {blocks:>10.2f} {passive:>11.2f}")


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [1_000, 10_000, 100_000]))
