"""``python -m bench.append``: ``append_many(100)`` on SQLite beside ``add_items(100)``.

The workload of an import or a fast-forward: batches of 100 realistic messages
(``prism_om.testing.dialog``: user messages of 60 to 120 words with dates, names and
figures; assistant replies), appended to one growing session. Each round appends one
new batch to each system, the system that goes first alternating from round to round,
and the ratio is taken inside the round (``bench.paired``): the figure is the median of
the per-round ratios, wall and CPU (``time.process_time``, every thread of the process).

Beside them, on the same texts, the part of prism's append that is not the store's: the
token count of each message (``TokenEstimator.count_many``, what the append runs) on its
own, CPU and wall, with its wall beside the SDK's whole ``add_items`` of the same round
(the control: an append that counts its texts cannot be faster than the tokeniser alone),
and the same count on one thread (what ``count_many``'s threads buy on this machine).

    python -m bench.append --rounds 15
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from prism_om.entries import SessionEntry
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.dialog import dialog_turns
from prism_om.testing.generate import make_message
from prism_om.tokens import get_estimator

SESSION = "bench-append"
BATCH = 100


def batches(rounds: int) -> list[list[SessionEntry]]:
    """``rounds + 1`` batches of ``BATCH`` messages each (the first warms both systems
    up), one chain across all of them."""
    out: list[list[SessionEntry]] = []
    parent: str | None = None
    turns = iter(dialog_turns((rounds + 1) * BATCH // 2 + 1, seed=11))
    for _ in range(rounds + 1):
        batch: list[SessionEntry] = []
        while len(batch) < BATCH:
            turn = next(turns)
            for role, text in (("user", turn.user), ("assistant", turn.assistant)):
                entry = make_message(
                    SESSION, f"m{turn.index:06d}{role[0]}", parent, role, text, turn.index
                )
                batch.append(entry)
                parent = entry.id
        out.append(batch[:BATCH])
    return out


def _items(batch: Sequence[SessionEntry]) -> list[dict[str, Any]]:
    return [{"role": e.message.role, "content": e.message.text()} for e in batch if e.message]


async def run(rounds: int) -> dict[str, Any]:
    from agents import SQLiteSession

    fixed = batches(rounds)
    walls: dict[str, list[float]] = {"prism": [], "sqlite-session": []}
    cpus: dict[str, list[float]] = {"prism": [], "sqlite-session": []}
    tokens_cpu: list[float] = []
    tokens_wall: list[float] = []
    one_thread_wall: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-append-") as tmp:
        store = await SqliteStore.open(os.path.join(tmp, "prism.db"))
        session = SQLiteSession(SESSION, os.path.join(tmp, "sdk.db"))
        try:
            await store.append_many(fixed[0])
            await session.add_items(_items(fixed[0]))

            async def prism(batch: list[SessionEntry]) -> None:
                await store.append_many(batch)

            async def sdk(batch: list[SessionEntry]) -> None:
                await session.add_items(_items(batch))

            arms = {"prism": prism, "sqlite-session": sdk}
            for r, batch in enumerate(fixed[1:]):
                names = list(arms) if r % 2 == 0 else list(reversed(arms))
                for name in names:
                    wall, cpu = time.perf_counter(), time.process_time()
                    await arms[name](batch)
                    walls[name].append(time.perf_counter() - wall)
                    cpus[name].append(time.process_time() - cpu)
                # The token counts alone, of the same texts (``count`` keeps no cache).
                texts = [e.message.text() for e in batch if e.message]
                started, wall = time.process_time(), time.perf_counter()
                get_estimator().count_many(texts)
                tokens_wall.append(time.perf_counter() - wall)
                tokens_cpu.append(time.process_time() - started)
                # The same count on one thread: what the threads buy on this machine.
                estimator, wall = get_estimator(), time.perf_counter()
                [estimator.count(text) for text in texts]
                one_thread_wall.append(time.perf_counter() - wall)
        finally:
            await store.close()
            session.close()
    wall_ratio = [p / s for p, s in zip(walls["prism"], walls["sqlite-session"], strict=True)]
    cpu_ratio = [p / s for p, s in zip(cpus["prism"], cpus["sqlite-session"], strict=True)]
    # The control: the tokeniser alone against the SDK's whole append, in the same round.
    floor = [t / s for t, s in zip(tokens_wall, walls["sqlite-session"], strict=True)]
    return {
        "rounds": rounds,
        "prism wall ms": statistics.median(walls["prism"]) * 1000,
        "sdk wall ms": statistics.median(walls["sqlite-session"]) * 1000,
        "prism cpu ms": statistics.median(cpus["prism"]) * 1000,
        "sdk cpu ms": statistics.median(cpus["sqlite-session"]) * 1000,
        "tokens cpu ms": statistics.median(tokens_cpu) * 1000,
        "tokens wall ms": statistics.median(tokens_wall) * 1000,
        "tokens wall ratio": statistics.median(floor),
        "one thread wall ms": statistics.median(one_thread_wall) * 1000,
        "wall ratio": statistics.median(wall_ratio),
        "cpu ratio": statistics.median(cpu_ratio),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.append", description=__doc__)
    parser.add_argument("--rounds", type=int, default=15, help="paired rounds (batches each)")
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args.rounds))
    load = os.getloadavg()[0]
    print(
        f"append_many({BATCH}) vs SQLiteSession.add_items({BATCH}), {figures['rounds']} "
        f"paired rounds, load {load:.1f}"
    )
    print(
        f"  wall: prism {figures['prism wall ms']:.1f} ms, SQLiteSession "
        f"{figures['sdk wall ms']:.1f} ms: {figures['wall ratio']:.2f}x (median of rounds)"
    )
    print(
        f"  cpu:  prism {figures['prism cpu ms']:.1f} ms, SQLiteSession "
        f"{figures['sdk cpu ms']:.1f} ms: {figures['cpu ratio']:.2f}x; of prism's, token "
        f"counts alone {figures['tokens cpu ms']:.1f} ms"
    )
    print(
        f"  the tokeniser alone (count_many of the batch's texts): wall "
        f"{figures['tokens wall ms']:.1f} ms, {figures['tokens wall ratio']:.2f}x "
        f"SQLiteSession's whole add_items (median of rounds); on one thread "
        f"{figures['one thread wall ms']:.1f} ms"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
