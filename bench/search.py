"""``python -m bench.search``: what search costs on SQLite, and what its index costs.

For each size, one session of messages (with an observation record every 50 messages, as
``bench.data``) whose words follow a Zipf law over a 20,000-word vocabulary, so a query
matches what real text would (a few common words, mostly rare ones) rather than every
other message. The session is loaded twice: with the ``search_terms`` index (the shipped
code: memory items indexed in their append, messages by the first search, which is run
and timed once the session is loaded) and with the index writes switched off (the same
code otherwise, no search), so the append time and bytes the index adds are measured on
the same data. Then, on the indexed store:

* ``search``: ``SessionStore.search`` of 3 words drawn from a random observation's text,
  limit 10 (Zipf text: most drawn words are common ones);
* ``messages``: the same query over messages only (``kinds=["message"]``): the bench's
  session has no dropper, so its active observations grow with it (2,000 at 100,000
  entries), which a real pool's caps prevent;
* ``common``: one of the 10 most frequent words, ``COMMON_QUERIES`` times (the worst
  case: its matches are a large part of the session, and a search costs its matches);
* ``page 20``: the public page of 20 messages around a random cursor
  (``recall_observational_memory_branch_page``), the figure the issue compares with.

Medians and 95th percentiles in milliseconds over ``--queries`` calls each; appends are
single-message ``append_at_leaf`` calls at the end of the loaded branch.

    python -m bench.search --sizes 10000,100000 --queries 100
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from prism_om.entries import SessionEntry, custom_entry
from prism_om.observational_memory import recall_observational_memory_branch_page
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.generate import make_message

SESSION = "bench-search"
VOCABULARY = 20_000
MESSAGES_PER_OBSERVATION = 50
SINGLE_APPENDS = 300
# The worst case is slow by design (its matches are much of the session): a few samples.
COMMON_QUERIES = 5


def _word(rank: int) -> str:
    # Letters only: the stemmer leaves them alone when they end in none of its suffixes.
    letters = "bcdfghjklmnpqrtvwxz"
    out = []
    n = rank
    while True:
        out.append(letters[n % len(letters)])
        n //= len(letters)
        if not n:
            break
    return "k" + "a".join(out) + "o"


class Corpus:
    """Zipf-distributed words (s = 1.1) over ``VOCABULARY`` ranks."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        weights = [1 / (rank + 1) ** 1.1 for rank in range(VOCABULARY)]
        self.cumulative = list(itertools.accumulate(weights))
        self.words = [_word(rank) for rank in range(VOCABULARY)]

    def text(self) -> str:
        count = self.rng.randint(8, 40)
        return " ".join(self.rng.choices(self.words, cum_weights=self.cumulative, k=count))


def session_entries(size: int, corpus: Corpus) -> list[SessionEntry]:
    entries: list[SessionEntry] = []
    parent: str | None = None
    window: list[str] = []
    stamp = ""
    roles = ("user", "assistant", "tool", "assistant")
    for n in range(size):
        if len(window) == MESSAGES_PER_OBSERVATION:
            data = {
                "type": "om.observations.recorded",
                "observations": [
                    {
                        "id": f"{n:012x}",
                        "text": corpus.text(),
                        "sourceEntryIds": window[-3:],
                    }
                ],
                "coversUpToId": window[-1],
            }
            entry = custom_entry(
                SESSION, data, parent_id=parent, entry_id=f"e{n:08d}", timestamp=stamp
            )
            window = []
        else:
            role = roles[n % len(roles)]
            entry = make_message(SESSION, f"e{n:08d}", parent, role, corpus.text(), n * 5)
            stamp = entry.timestamp
            window.append(entry.id)
        entries.append(entry)
        parent = entry.id
    return entries


@contextlib.contextmanager
def index_writes_off() -> Iterator[None]:
    """The append path without its index rows (the one thing the baseline lacks): a
    memory record's rows are written in its append, a message's by the first search
    (which ``load`` runs only on the indexed store)."""
    from prism_om.stores.sql import memory_folds as folds

    async def nothing(conn: Any, rows: Any) -> None:
        return None

    saved = folds.write_search_rows
    folds.write_search_rows = nothing  # type: ignore[assignment]
    try:
        yield
    finally:
        folds.write_search_rows = saved  # type: ignore[assignment]


def _ms(samples: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def load(
    path: Path, entries: list[SessionEntry], extra: list[SessionEntry], *, index: bool = True
) -> dict[str, Any]:
    """Load ``entries``, then append ``extra`` one at a time, then (``index``) run the
    first search, which indexes every message; the times and the bytes."""
    async with await SqliteStore.open(path) as store:
        started = time.perf_counter()
        for start in range(0, len(entries), 1000):
            await store.append_many(entries[start : start + 1000])
        loaded = time.perf_counter() - started
        singles = []
        for entry in extra:
            t0 = time.perf_counter()
            await store.append_at_leaf([entry])
            singles.append(time.perf_counter() - t0)
        first = 0.0
        if index:
            t0 = time.perf_counter()
            await store.search(SESSION, "first", limit=1)
            first = time.perf_counter() - t0
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return {"load_s": loaded, "append": _ms(singles), "bytes": _bytes(path), "first_s": first}


async def reads(
    path: Path, entries: list[SessionEntry], corpus: Corpus, queries: int
) -> dict[str, Any]:
    rng = random.Random(5)
    messages = [e for e in entries if e.kind == "message"]
    observations = [o["text"] for e in entries if e.data for o in e.data.get("observations", ())]
    counts: dict[str, int] = {}
    for e in messages[:5000]:
        for w in e.message.text().split():  # type: ignore[union-attr]
            counts[w] = counts.get(w, 0) + 1
    common = sorted(counts, key=counts.__getitem__, reverse=True)[:10]
    out: dict[str, Any] = {}
    async with await SqliteStore.open(path) as store:
        samples: dict[str, list[float]] = {
            "search": [],
            "messages": [],
            "common": [],
            "page 20": [],
        }
        hits: list[int] = []
        for _ in range(queries):
            # Three words of an observation, as a question about it would use.
            words = rng.choice(observations).split()
            query = " ".join(rng.sample(words, k=min(3, len(words))))
            t0 = time.perf_counter()
            found = await store.search(SESSION, query, limit=10)
            samples["search"].append(time.perf_counter() - t0)
            hits.append(len(found))
            t0 = time.perf_counter()
            await store.search(SESSION, query, limit=10, kinds=["message"])
            samples["messages"].append(time.perf_counter() - t0)
            if len(samples["common"]) < COMMON_QUERIES:
                t0 = time.perf_counter()
                await store.search(SESSION, rng.choice(common), limit=10)
                samples["common"].append(time.perf_counter() - t0)
            cursor = rng.choice(messages[: len(messages) - 25]).id
            t0 = time.perf_counter()
            await recall_observational_memory_branch_page(
                store, cursor, session_id=SESSION, limit=20
            )
            samples["page 20"].append(time.perf_counter() - t0)
        for name, values in samples.items():
            out[name] = _ms(values)
        out["hits"] = statistics.mean(hits)
    return out


async def run(sizes: Sequence[int], queries: int) -> None:
    print(
        f"{'entries':>9} {'search p50/p95':>16} {'messages p50/p95':>17} "
        f"{'common p50/p95':>16} {'page20 p50/p95':>16} "
        f"{'append +idx':>13} {'append base':>13} {'load +idx/base s':>17} "
        f"{'bytes +idx/base':>22}"
    )
    for size in sizes:
        corpus = Corpus(size)
        entries = session_entries(size, corpus)
        tail = session_entries(SINGLE_APPENDS + 1, corpus)[1:]
        extra = [
            e.model_copy(update={"id": f"x{n:08d}", "parent_id": None})
            for n, e in enumerate(m for m in tail if m.kind == "message")
        ]
        with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
            indexed, base = Path(tmp) / "indexed.db", Path(tmp) / "base.db"
            with_index = await load(indexed, entries, extra)
            with index_writes_off():
                without = await load(base, entries, extra, index=False)
            figures = await reads(indexed, entries, corpus, queries)
        s, c, p = figures["search"], figures["common"], figures["page 20"]
        m = figures["messages"]
        a, b = with_index["append"], without["append"]
        print(
            f"{size:>9,} {s[0]:>7.2f}/{s[1]:<8.2f} {m[0]:>7.2f}/{m[1]:<9.2f} "
            f"{c[0]:>7.2f}/{c[1]:<8.2f} "
            f"{p[0]:>7.2f}/{p[1]:<8.2f} {a[0]:>6.3f}/{a[1]:<6.3f} {b[0]:>6.3f}/{b[1]:<6.3f} "
            f"{with_index['load_s']:>7.1f}/{without['load_s']:<9.1f} "
            f"{with_index['bytes'] / 1e6:>9.1f}/{without['bytes'] / 1e6:<6.1f}MB "
            f"(+{100 * (with_index['bytes'] / without['bytes'] - 1):.0f}%)"
        )
        print(
            f"{'':>9} mean hits {figures['hits']:.1f}; load +"
            f"{100 * (with_index['load_s'] / without['load_s'] - 1):.0f}%, single append p50 +"
            f"{100 * (a[0] / b[0] - 1):.0f}%; the first search (indexes every message) "
            f"{with_index['first_s']:.2f} s"
        )
        sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__)
    parser.add_argument("--sizes", default="10000,100000", help="entry counts, comma-separated")
    parser.add_argument("--queries", type=int, default=100, help="calls per figure")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    asyncio.run(run(sizes, args.queries))


if __name__ == "__main__":
    main()
