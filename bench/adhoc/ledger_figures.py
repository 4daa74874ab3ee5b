"""ledger()+context blocks on SQLite for a 200k-entry session with 2,000 observations.

Usage: python bench/adhoc/ledger_figures.py N PER [URL]

``ledger()`` + context blocks on a store of N messages with one observation per PER
messages, beside the pure fold (``... 200000 100`` for 2,000 observations on SQLite).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from prism_om import ContextBlock, ObservationalMemoryLedger
from prism_om.entries import SessionEntry, custom_entry
from prism_om.ids import create_memory_id
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    fold_observational_memory_ledger,
)
from prism_om.stores import SessionStore, open_store
from prism_om.testing.generate import make_message

DEFAULT_N = 200_000
DEFAULT_PER = 100
SESSION_ID = "big"
BATCH_SIZE = 10_000
REPEATS = 5


def observation_record(
    sid: str, window: list[str], last: SessionEntry, parent: str, i: int
) -> SessionEntry:
    """An ``om.observations.recorded`` entry with one observation citing ``window``."""
    obs = [
        {
            "id": create_memory_id(),
            "text": f"fact from {window[0]}",
            "sourceEntryIds": [window[0], window[-1]],
            "observedAt": last.timestamp,
        }
    ]
    return custom_entry(
        sid,
        {"type": "om.observations.recorded", "observations": obs, "coversUpToId": last.id},
        parent_id=parent,
        entry_id=f"r{i}",
    )


async def build_session(store: SessionStore, sid: str, n: int, per: int) -> int:
    """Append ``n`` messages with a record after every ``per``; return the record count."""
    batch: list[SessionEntry] = []
    parent = None
    n_obs = 0
    window: list[str] = []
    for i in range(n):
        eid = f"m{i}"
        e = make_message(
            sid,
            eid,
            parent,
            "user" if i % 2 == 0 else "assistant",
            f"message {i} about deploy budget {i % 97}",
            i,
        )
        batch.append(e)
        parent = eid
        window.append(eid)
        if len(window) == per:
            n_obs += 1
            ce = observation_record(sid, window, e, parent, i)
            batch.append(ce)
            parent = ce.id
            window = []
        if len(batch) >= BATCH_SIZE:
            await store.append_many(batch)
            batch = []
    if batch:
        await store.append_many(batch)
    return n_obs


async def time_store_ledger(
    store: SessionStore, sid: str
) -> tuple[ObservationalMemoryLedger, list[ContextBlock], list[float]]:
    """The store's ledger and context blocks, and the seconds each of five rounds took."""
    times: list[float] = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        ledger = await store.ledger(sid)
        blocks = await build_observational_memory_context_blocks(store, session_id=sid)
        times.append(time.perf_counter() - t)
    return ledger, blocks, times


async def main(n: int, per: int, url: str | None) -> None:
    """Build the session, then print the store and pure ledger+blocks figures."""
    if url is None:
        url = f"sqlite:{tempfile.mkdtemp()}/b.db"
    store = await open_store(url)
    sid = SESSION_ID
    t0 = time.perf_counter()
    n_obs = await build_session(store, sid, n, per)
    print(f"built {n} messages + {n_obs} records in {time.perf_counter() - t0:.1f}s")
    ledger, blocks, times = await time_store_ledger(store, sid)
    print(
        f"store ledger()+blocks: median {statistics.median(times) * 1000:.1f} ms  "
        f"({len(ledger.observations)} observations)"
    )
    t = time.perf_counter()
    branch = await store.entries(sid)
    tb = time.perf_counter() - t
    t = time.perf_counter()
    l2 = fold_observational_memory_ledger(branch)
    b2 = build_observational_memory_context_blocks(branch)
    tf = time.perf_counter() - t
    assert l2 == ledger
    assert b2 == blocks
    print(
        f"pure: branch() {tb * 1000:.0f} ms + fold+blocks {tf * 1000:.0f} ms "
        f"= {(tb + tf) * 1000:.0f} ms"
    )
    await store.close()


def parse_args() -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "n", nargs="?", type=int, default=DEFAULT_N, help=f"messages (default {DEFAULT_N})"
    )
    parser.add_argument(
        "per",
        nargs="?",
        type=int,
        default=DEFAULT_PER,
        help=f"messages per observation (default {DEFAULT_PER})",
    )
    parser.add_argument(
        "url", nargs="?", default=None, help="store URL (default: a temporary SQLite file)"
    )
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    asyncio.run(main(args.n, args.per, args.url))
