"""Validation of wide memory records, and the bounds on entries, tokens and recall.

Usage: python bench/adhoc/bounds_figures.py [--sizes 10000 20000 100000] [--url memory:]
       [--timeout 120]

For each size N: a branch of N messages, then one ``om.observations.recorded`` record
citing every one of them (split into observations of at most 4,096 sources, the hard cap;
the code before the cap accepts the same record), then a reflection over 500 observations
recorded near the root. Prints the time of each append, the part that is validation.

Run it against the code before the change by putting that tree first on the path, e.g.
``git archive 5c5cc6f prism_om | tar -x -C /tmp/old && PYTHONPATH=/tmp/old python ...``.
Each size runs in a child process killed after ``--timeout`` seconds, since the old code
takes minutes.

``--extras`` also prints the token count of a 50 MB one-letter run and an 8 MiB one, the
append of an oversized message, and the size of a recall of a 4,096-source observation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import resource
import time
from typing import Any

TS = "2024-05-01T10:00:00Z"
PER_OBSERVATION = 4096


def _record(sid: str, eid: str, parent: str, sources: list[str], base: int) -> Any:
    from prism_om.entries import custom_entry

    observations = [
        {
            "id": f"{base + n:012x}",
            "text": "wide",
            "sourceEntryIds": sources[i : i + PER_OBSERVATION],
            "observedAt": TS,
        }
        for n, i in enumerate(range(0, len(sources), PER_OBSERVATION))
    ]
    data = {"type": "om.observations.recorded", "observations": observations}
    return custom_entry(sid, data, parent_id=parent, entry_id=eid, timestamp=TS)


async def _run_size(url: str, size: int) -> dict[str, float]:
    from prism_om.entries import custom_entry, message_entry
    from prism_om.stores import open_store

    if url.startswith("jsonl:"):
        url = f"{url}-{size}"
    store = await open_store(url)
    try:
        # m0 .. m600, then 500 observations of m0 .. m499 recorded near the root (for the
        # reflection below), then the rest of the messages.
        chain = []
        parent: str | None = None
        for i in range(size):
            chain.append(
                message_entry(
                    "s1", "user", f"m {i}", parent_id=parent, entry_id=f"m{i}", timestamp=TS
                )
            )
            parent = f"m{i}"
            if i == 600:
                early = [
                    {"id": f"{n:012x}", "text": "e", "sourceEntryIds": [f"m{n}"], "observedAt": TS}
                    for n in range(500)
                ]
                data = {"type": "om.observations.recorded", "observations": early}
                chain.append(
                    custom_entry("s1", data, parent_id=parent, entry_id="early", timestamp=TS)
                )
                parent = "early"
        started = time.perf_counter()
        await store.append_many(chain)
        load = time.perf_counter() - started
        leaf = chain[-1].id
        wide = _record("s1", "wide", leaf, [f"m{i}" for i in range(size)], 0x100000)
        started = time.perf_counter()
        await store.append(wide)
        wide_s = time.perf_counter() - started
        reflection = custom_entry(
            "s1",
            {
                "type": "om.reflections.recorded",
                "reflections": [
                    {
                        "id": "cccccccccccc",
                        "text": "r",
                        "observationIds": [f"{n:012x}" for n in range(500)],
                    }
                ],
            },
            parent_id="wide",
            entry_id="refl",
            timestamp=TS,
        )
        started = time.perf_counter()
        await store.append(reflection)
        refl_s = time.perf_counter() - started
        return {"append_branch_s": load, "wide_record_s": wide_s, "reflection_500_s": refl_s}
    finally:
        await store.close()


def _child(url: str, size: int, queue: Any) -> None:
    queue.put(asyncio.run(_run_size(url, size)))


def _extras() -> None:
    from prism_om.tokens import get_estimator

    est = get_estimator()
    for label, text in (("8 MiB run", "a" * (8 << 20)), ("50 MB run", "a" * 50_000_000)):
        started = time.perf_counter()
        count = est.count(text)
        took = time.perf_counter() - started
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f"tokens of a {label}: {count:,} in {took:.2f} s (max RSS so far {rss} MB)")

    async def oversized_and_recall() -> None:
        from prism_om.entries import message_entry
        from prism_om.observational_memory import recall_observational_memory
        from prism_om.stores import open_store

        store = await open_store("memory:")
        root = message_entry("s1", "user", "root", entry_id="root", timestamp=TS)
        await store.append(root)
        big = message_entry("s1", "user", "a" * 50_000_000, parent_id="root", entry_id="big")
        started = time.perf_counter()
        try:
            await store.append(big)
            print("50 MB message: accepted")
        except Exception as exc:
            print(f"50 MB message: {type(exc).__name__} in {time.perf_counter() - started:.3f} s")
        chain = [
            message_entry(
                "s1", "user", "x" * 200, parent_id=f"s{i - 1}" if i else "root", entry_id=f"s{i}"
            )
            for i in range(PER_OBSERVATION)
        ]
        await store.append_many(chain)
        await store.append(_record("s1", "rec", chain[-1].id, [e.id for e in chain], 0x200000))
        result = await recall_observational_memory(store, f"{0x200000:012x}", session_id="s1")
        body = json.dumps(result.to_json())
        print(
            f"recall of a {PER_OBSERVATION}-source observation: {len(result.sources)} sources, "
            f"{len(body):,} bytes of JSON (sourcesTotal {result.sources_total})"
        )
        await store.close()

    asyncio.run(oversized_and_recall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 20_000, 100_000])
    parser.add_argument("--url", default="memory:")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--extras", action="store_true")
    args = parser.parse_args()
    import prism_om

    print(f"prism_om from {prism_om.__file__}; store {args.url}")
    for size in args.sizes:
        queue: Any = multiprocessing.Queue()
        child = multiprocessing.Process(target=_child, args=(args.url, size, queue))
        child.start()
        child.join(args.timeout)
        if child.is_alive():
            child.kill()
            child.join()
            print(f"N={size:>7,}: killed after {args.timeout:.0f} s")
            continue
        got = queue.get()
        print(
            f"N={size:>7,}: branch append {got['append_branch_s']:.2f} s; record citing all "
            f"{size:,} messages {got['wide_record_s']:.3f} s; reflection over 500 early "
            f"observations {got['reflection_500_s']:.3f} s"
        )
    if args.extras:
        _extras()


if __name__ == "__main__":
    main()
