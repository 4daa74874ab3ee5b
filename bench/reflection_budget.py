"""``python -m bench.reflection_budget``: a long scripted session under the memory caps.

Each turn appends a user message (a dated fact with names and numbers, or small talk)
and an assistant reply, builds the context blocks the attached agent would get
(``build_observational_memory_context_blocks`` on the store, as its context provider
does), and flushes the memory runtime (offline observer and reflector, the deterministic
consolidation, the lowest-relevance dropper). It prints, per window of turns, the
largest rendered memory seen at a context build against ``observations_pool_max_tokens``,
the largest active reflections against ``reflection.budget_tokens``, the supersessions so
far, and the milliseconds per turn; then a summary line per adapter. No scopes, no model,
no network.

    python -m bench.reflection_budget --turns 10000 --adapters memory,jsonl,sqlite,postgres
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from prism_om.observational_memory import build_observational_memory_context_blocks
from prism_om.session import Session
from prism_om.stores import SessionStore, open_store
from prism_om.tokens import TokenEstimator, get_estimator
from prism_om.workers import (
    ObservationalMemoryRuntime,
    OfflineMemoryProvider,
    create_observational_memory_runtime,
)

from .pg import postgres_server

POOL_MAX_TOKENS = 2000
POOL_TARGET_TOKENS = 1400
PEOPLE = ("Dana", "Sam", "Priya", "Jonas", "Mei", "Omar", "Lena", "Kofi")
THINGS = ("billing", "search", "checkout", "ledger", "gateway", "reports", "auth", "export")


def turn_text(turn: int) -> str:
    """A scripted user turn: mostly a dated decision, sometimes small talk."""
    who, what = PEOPLE[turn % len(PEOPLE)], THINGS[(turn // 3) % len(THINGS)]
    if turn % 5 == 4:
        return f"Thanks, got it ({turn})."
    return (
        f"{who} decided the {what} release {turn // 7}.{turn % 7} ships on "
        f"2026-{1 + turn % 12:02d}-{1 + turn % 28:02d} with budget {100 + turn} EUR."
    )


# The render writes "- [id] text" (older renders put "(priority) " before the text).
_REFLECTION_LINE = re.compile(r"^- \[[a-f0-9]{12}\] (?:\((?:high|medium|low)\) )?(.*)$")


def _reflection_tokens(text: str, estimator: TokenEstimator) -> int:
    """Tokens of the reflection texts a rendered memory block shows."""
    if "## Reflections\n" not in text:
        return 0
    section = text.split("## Reflections\n", 1)[1].split("\n## ", 1)[0]
    found = (_REFLECTION_LINE.match(line) for line in section.splitlines())
    return sum(estimator.count(m.group(1)) for m in found if m)


def capped_runtime(session: Session) -> ObservationalMemoryRuntime:
    """The offline workers and the lowest-relevance dropper under this bench's caps."""
    offline = OfflineMemoryProvider()
    return create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        session_model="offline",
        observation={"provider": offline},
        reflection={"provider": offline},
        settings={
            "observation": {"message_tokens": 200},
            "reflection": {"observation_tokens": 600},
            "dropper": {"policy": "lowest-relevance"},
            "context": {
                "recent_messages": 6,
                "observations_pool_max_tokens": POOL_MAX_TOKENS,
                "observations_pool_target_tokens": POOL_TARGET_TOKENS,
            },
        },
    )


async def run_session(store: SessionStore, turns: int, window: int, name: str) -> None:
    session = Session(store, "long")
    runtime = capped_runtime(session)
    budget = runtime.settings.reflection.budget_tokens
    estimator = get_estimator()
    worst = worst_reflections = 0
    started = window_start = time.perf_counter()
    windows: list[float] = []
    for turn in range(turns):
        blocks = await build_observational_memory_context_blocks(
            store, session_id="long", keep_recent_entries=6
        )
        memory = next((b for b in blocks if b.name == "observational-memory"), None)
        text = memory.text if memory is not None else ""
        worst = max(worst, estimator.count(text))
        # Reflections stay visible while active, so the block lists every active one.
        worst_reflections = max(worst_reflections, _reflection_tokens(text, estimator))
        await session.append_message("user", turn_text(turn))
        await session.append_message("assistant", "Noted.")
        await runtime.flush()
        if (turn + 1) % window == 0:
            now = time.perf_counter()
            windows.append((now - window_start) * 1000 / window)
            window_start = now
            ledger = await store.ledger("long")
            print(
                f"{name:8} turns {turn + 1:6}  memory max {worst:5}/{POOL_MAX_TOKENS}  "
                f"reflections max {worst_reflections:5}/{budget}  "
                f"supersessions {len(ledger.supersessions):5}  "
                f"reflections {len(ledger.reflections):5}  "
                f"observations {len(ledger.observations):6} "
                f"(dropped {len(ledger.dropped_observation_ids):6})  "
                f"{windows[-1]:7.1f} ms/turn",
                flush=True,
            )
    total = time.perf_counter() - started
    held = "held" if worst <= POOL_MAX_TOKENS and worst_reflections <= budget else "BROKEN"
    growth = windows[-1] / windows[0] if windows and windows[0] else float("nan")
    print(
        f"{name:8} SUMMARY turns {turns}: rendered memory max {worst} <= {POOL_MAX_TOKENS}, "
        f"active reflections max {worst_reflections} <= {budget}: {held}; "
        f"{total:.0f} s, last/first window ms/turn {growth:.2f}",
        flush=True,
    )


async def run_adapter(kind: str, turns: int, window: int, folder: Path, pg_base: str) -> None:
    if kind == "postgres":
        from prism_om.testing.postgres_cluster import with_fresh_schema

        url = with_fresh_schema(pg_base)
    else:
        url = {
            "memory": "memory:",
            "jsonl": f"jsonl:{folder / 'jsonl'}",
            "sqlite": f"sqlite:{folder / 'store.db'}",
        }[kind]
    async with await open_store(url) as store:
        await run_session(store, turns, window, kind)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reflection_budget", description=__doc__)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=1000, help="turns per printed line")
    parser.add_argument("--adapters", default="memory,jsonl,sqlite,postgres")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.adapters.split(",") if k.strip()]
    with tempfile.TemporaryDirectory(prefix="prism-reflect-") as tmp:
        if "postgres" in kinds:
            with postgres_server() as base:
                for kind in kinds:
                    asyncio.run(run_adapter(kind, args.turns, args.window, Path(tmp), base))
        else:
            for kind in kinds:
                asyncio.run(run_adapter(kind, args.turns, args.window, Path(tmp), ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
