"""Profile attached turns of the reflection-budget session at two lengths.

Runs the scripted session of ``bench.reflection_budget`` on one adapter up to
``--at`` turns, then profiles ``--sample`` further turns with cProfile and
prints the top functions by cumulative time, plus ms/turn.

    python -m bench.adhoc.turn_profile --adapter memory --at 300 --sample 20
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from prism_om.observational_memory import build_observational_memory_context_blocks
from prism_om.session import Session
from prism_om.stores import open_store

from ..reflection_budget import capped_runtime, turn_text


async def run(url: str, at: int, sample: int, top: int) -> None:
    async with await open_store(url) as store:
        session = Session(store, "long")
        runtime = capped_runtime(session)

        async def turn(n: int) -> None:
            await build_observational_memory_context_blocks(
                store, session_id="long", keep_recent_entries=6
            )
            await session.append_message("user", turn_text(n))
            await session.append_message("assistant", "Noted.")
            await runtime.flush()

        for n in range(at):
            await turn(n)
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        for n in range(at, at + sample):
            await turn(n)
        profile.disable()
        elapsed = (time.perf_counter() - started) * 1000 / sample
        print(f"{url} at {at}: {elapsed:.1f} ms/turn (profiled)")
        pstats.Stats(profile).sort_stats("cumulative").print_stats(top)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.adhoc.turn_profile")
    parser.add_argument("--adapter", default="memory")
    parser.add_argument("--at", type=int, default=300)
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--top", type=int, default=45)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="prism-turn-") as tmp:
        url = {
            "memory": "memory:",
            "jsonl": f"jsonl:{Path(tmp) / 'jsonl'}",
            "sqlite": f"sqlite:{Path(tmp) / 'store.db'}",
        }[args.adapter]
        asyncio.run(run(url, args.at, args.sample, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
