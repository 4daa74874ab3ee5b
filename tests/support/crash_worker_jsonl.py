"""A second process for tests/stores/test_jsonl_store.py (run with sys.executable, not collected).

Modes:

* ``crash DIR ROUND SEED``: append batches of 1..50 entries to session ``crash`` forever,
  continuing from its leaf, printing ``committed <batch-id> <size>`` after each
  ``append_many`` returns; the test SIGKILLs it at a random moment.
* ``append DIR SESSION PREFIX COUNT [PARENT]``: append COUNT entries one at a time, each
  the child of the previous one (the first the child of PARENT, or a root).
* ``step DIR N``: append ``e<N>`` under the leaf of session ``s1`` and a root ``t<N>``
  in a new session ``t<N>``.
"""

from __future__ import annotations

import asyncio
import random
import sys

from prism_om.entries import message_entry
from prism_om.stores.jsonl import JsonlStore


async def crash(directory: str, round_no: int, seed: int) -> None:
    rng = random.Random(seed)
    store = await JsonlStore.open(directory)
    parent = await store.leaf("crash")
    print("ready", flush=True)
    for number in range(1_000_000):
        size = rng.randint(1, 50)
        batch_id = f"r{round_no}.b{number}"
        batch = []
        for i in range(size):
            entry = message_entry(
                "crash",
                "user",
                f"{size} naïve ünïcödé 日本語",
                parent_id=parent,
                entry_id=f"{batch_id}.{i}",
            )
            batch.append(entry)
            parent = entry.id
        await store.append_many(batch)
        print(f"committed {batch_id} {size}", flush=True)


async def append(directory: str, session: str, prefix: str, count: int, parent: str | None) -> None:
    async with await JsonlStore.open(directory, fsync=False) as store:
        for i in range(count):
            entry_id = f"{prefix}-{i}"
            await store.append(
                message_entry(session, "user", entry_id, parent_id=parent, entry_id=entry_id)
            )
            parent = entry_id


async def step(directory: str, n: int) -> None:
    async with await JsonlStore.open(directory, fsync=False) as store:
        leaf = await store.leaf("s1")
        await store.append(
            message_entry("s1", "user", f"step {n}", parent_id=leaf, entry_id=f"e{n}")
        )
        await store.append(message_entry(f"t{n}", "user", "root", entry_id=f"t{n}"))


def main(argv: list[str]) -> None:
    mode, directory, *rest = argv
    if mode == "crash":
        asyncio.run(crash(directory, int(rest[0]), int(rest[1])))
    elif mode == "append":
        parent = rest[3] if len(rest) > 3 else None
        asyncio.run(append(directory, rest[0], rest[1], int(rest[2]), parent))
    elif mode == "step":
        asyncio.run(step(directory, int(rest[0])))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
