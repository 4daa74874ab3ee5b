"""One writer process of the PostgreSQL concurrency tests and bench script.

``python pg_append_worker.py URL MODE SESSION TAG COUNT [PARENT]`` opens its own store
(its own pool: another "host"), prints ``ready``, waits for a line on stdin so that all
writers start together, then appends COUNT messages ``TAG-0 .. TAG-(COUNT-1)`` one call
each: MODE ``leaf`` through ``append_at_leaf``, MODE ``parents`` through ``append_many``
with explicit parents (a chain under PARENT, or a new session's root when absent). It
prints the seconds the appends took.
"""

from __future__ import annotations

import asyncio
import sys
import time

from prism_om.stores import open_store
from prism_om.testing.generate import make_message


async def append_chain(
    url: str, mode: str, session_id: str, tag: str, count: int, parent: str | None
) -> float:
    store = await open_store(url)
    try:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        started = time.perf_counter()
        previous = parent
        for n in range(count):
            entry_id = f"{tag}-{n}"
            if mode == "leaf":
                entry = make_message(session_id, entry_id, None, "user", f"{tag} {n}", n)
                await store.append_at_leaf([entry])
            else:
                entry = make_message(session_id, entry_id, previous, "user", f"{tag} {n}", n)
                await store.append_many([entry])
                previous = entry_id
        return time.perf_counter() - started
    finally:
        await store.close()


def main(argv: list[str]) -> None:
    url, mode, session_id, tag, count = argv[:5]
    parent = argv[5] if len(argv) > 5 else None
    elapsed = asyncio.run(append_chain(url, mode, session_id, tag, int(count), parent))
    print(f"{elapsed:.6f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
