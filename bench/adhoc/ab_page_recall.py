"""A/B timing of the public page and recall paths on one session of 10,000 entries.

Run it from two checkouts (``cd OLD && python /path/to/ab_page_recall.py``; ``python -m``
picks the checkout's own ``prism_om`` first) to compare code versions on identical data,
without the rest of ``python -m bench``: every 51st entry is an observation citing the
message before it; the page is 20 messages after a cursor in the middle; the recall is an
observation in the middle. Prints the three best of five means of 3,000 calls each.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable

from prism_om.entries import SessionEntry, custom_entry, message_entry
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import open_store

ENTRIES = 10_000
CALLS = 3_000


def session() -> tuple[list[SessionEntry], list[str]]:
    entries: list[SessionEntry] = []
    memory_ids: list[str] = []
    parent: str | None = None
    for i in range(ENTRIES):
        if i % 51 == 50 and parent is not None:
            memory_id = f"{i:012x}"
            observation = {
                "id": memory_id,
                "text": f"fact {i}",
                "sourceEntryIds": [parent],
                "observedAt": "2026-01-01T00:00:00.000Z",
                "priority": "medium",
            }
            data = {"type": "om.observations.recorded", "observations": [observation]}
            entry = custom_entry("s", data, parent_id=parent, entry_id=f"e{i:05d}")
            memory_ids.append(memory_id)
        else:
            text = f"message {i} " + "word " * 12
            entry = message_entry("s", "user", text, parent_id=parent, entry_id=f"e{i:05d}")
        entries.append(entry)
        parent = entry.id
    return entries, memory_ids


async def best_means(call: Callable[[], Awaitable[object]]) -> list[float]:
    for _ in range(200):
        await call()
    means = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(CALLS):
            await call()
        means.append((time.perf_counter() - started) / CALLS * 1e6)
    return sorted(means)[:3]


async def main(kind: str) -> None:
    entries, memory_ids = session()
    with tempfile.TemporaryDirectory() as directory:
        url = {"sqlite": f"sqlite:{directory}/ab.db", "jsonl": f"jsonl:{directory}/ab"}
        async with await open_store(url.get(kind, "memory:")) as store:
            for start in range(0, ENTRIES, 500):
                await store.append_many(entries[start : start + 500])
            cursor = entries[ENTRIES // 2 + 1].id
            memory_id = memory_ids[len(memory_ids) // 2]

            async def page() -> object:
                return await recall_observational_memory_branch_page(
                    store, cursor, session_id="s", limit=20
                )

            async def recall() -> object:
                return await recall_observational_memory(store, memory_id, session_id="s")

            for name, call in (("page of 20", page), ("recall by id", recall)):
                print(f"{name}: " + ", ".join(f"{m:.1f} µs" for m in await best_means(call)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", choices=("sqlite", "jsonl", "memory"), default="sqlite")
    asyncio.run(main(parser.parse_args().adapter))
