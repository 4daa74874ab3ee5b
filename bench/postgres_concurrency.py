"""``python -m bench.postgres_concurrency``: do appends to different sessions run in parallel?

    python -m bench.postgres_concurrency [--appends N] [--url postgresql://...]

Starts its own throwaway cluster (``prism_om.testing.postgres_cluster``; or uses ``--url``), then
times writer processes (each its own store and pool: its own "host"), started together,
each making N single-entry ``append_at_leaf`` calls:

- one process into one session (the baseline),
- four processes into four sessions (the claim: well under 4x the baseline),
- four processes into one session (serialised by the per-session lock),
- four processes by explicit parents into four sessions.

After each run every session is checked entry by entry (``tests/support/pg_concurrency``)
and the script prints entries appended, entries found, forks and the times. A script
that prints numbers, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The writers and the entry-by-entry check are the concurrency test's own (tests/support).
sys.path.append(os.path.join(ROOT, "tests"))

from support.pg_concurrency import Writer, check_session, run_writers  # noqa: E402

from prism_om.stores import open_store  # noqa: E402
from prism_om.testing.postgres_cluster import (  # noqa: E402
    drop_schema,
    throwaway_cluster,
    with_fresh_schema,
)


@contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with throwaway_cluster() as base:
        yield base


async def verify(url: str, writers: list[Writer]) -> tuple[int, int, list[str]]:
    """Entries found, forks (leaves beyond one per session), problems."""
    sessions: dict[str, dict[str, int]] = {}
    for w in writers:
        sessions.setdefault(w.session_id, {})[w.tag] = w.count
    found = forks = 0
    problems: list[str] = []
    async with await open_store(url) as store:
        for session_id, chains in sessions.items():
            result = await check_session(store, session_id, chains)
            found += result.entries
            forks += result.leaves - 1
            problems += result.problems
    return found, forks, problems


def scenario(base: str, name: str, writers: list[Writer]) -> float:
    url = with_fresh_schema(base)
    try:
        started = time.perf_counter()
        times = run_writers(url, writers)
        wall = time.perf_counter() - started
        found, forks, problems = asyncio.run(verify(url, writers))
        appended = sum(w.count for w in writers)
        slowest = max(times)
        print(
            f"{name:<44} appended {appended:>5}  found {found:>5}  forks {forks}  "
            f"appending {slowest:6.2f} s (slowest writer; wall incl. start {wall:5.2f} s)  "
            f"{1000 * slowest / max(w.count for w in writers):5.2f} ms/append per writer"
        )
        for problem in problems[:5]:
            print(f"    PROBLEM: {problem}")
        return slowest
    finally:
        drop_schema(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=500, help="appends per writer")
    parser.add_argument("--url", help="an existing server instead of a throwaway cluster")
    args = parser.parse_args()
    n = args.appends
    tags = ("w0", "w1", "w2", "w3")
    print(f"{os.cpu_count()} cores; {n} appends per writer process")
    with server(args.url) as base:
        one = scenario(
            base, "1 process -> 1 session (append_at_leaf)", [Writer("leaf", "s", "w0", n)]
        )
        four = scenario(
            base,
            "4 processes -> 4 sessions (append_at_leaf)",
            [Writer("leaf", f"s-{t}", t, n) for t in tags],
        )
        shared = scenario(
            base,
            "4 processes -> 1 session (append_at_leaf)",
            [Writer("leaf", "s", t, n) for t in tags],
        )
        scenario(
            base,
            "4 processes -> 4 sessions (explicit parents)",
            [Writer("parents", f"s-{t}", t, n) for t in tags],
        )
    print(
        f"4 sessions concurrently / 1 session: {four / one:.2f}x "
        f"(claim: < 4x; serial would be ~4x); 4 writers on 1 session: {shared / one:.2f}x"
    )


if __name__ == "__main__":
    main()
