"""``python -m bench.inspect_page``: how long the inspect page takes on a long session.

Builds one session of ``--size`` entries (the benchmark dataset: messages with an
observation record every few messages, a dropper keeping the live pool near its cap) per
adapter, reopens the store read-only as ``prism-om inspect`` does, then times over the ASGI
app (no network): the session page (first answer, then the median of ``--repeat``), an
older timeline page, a recall fragment, and the charts fragment (the one route that reads
the whole branch; the page loads it after it is shown). Prints one line per figure.

    python -m bench.inspect_page --size 100000 --adapters sqlite,jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import httpx

from prism_om.inspect import create_inspect_app
from prism_om.stores import open_store

from .data import SESSION_ID, build_dataset, capped_entries

BASE = "http://127.0.0.1:8787"
BATCH = 2000


async def _timed(call: Callable[[], Awaitable[httpx.Response]]) -> tuple[float, httpx.Response]:
    start = time.perf_counter()
    response = await call()
    return time.perf_counter() - start, response


async def run(kind: str, size: int, repeat: int, workdir: Path) -> None:
    url = f"sqlite:{workdir / 'inspect.db'}" if kind == "sqlite" else f"jsonl:{workdir / 'jl'}"
    entries = capped_entries(build_dataset(size))
    async with await open_store(url, create=True) as store:
        for start in range(0, len(entries), BATCH):
            await store.append_many(entries[start : start + BATCH])
    began = time.perf_counter()
    async with await open_store(url, read_only=True) as store:
        opened = time.perf_counter() - began
        app = create_inspect_app(store)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            page_url = f"/s/{SESSION_ID}"
            first, page = await _timed(lambda: client.get(page_url))
            assert page.status_code == 200, page.text[:500]
            later = [(await _timed(lambda: client.get(page_url)))[0] for _ in range(repeat)]
            older = re.search(r'class="older" href="([^"]+)"', page.text)
            assert older is not None
            older_url = older.group(1).replace("&amp;", "&")
            back, _ = await _timed(lambda: client.get(older_url))
            memory_id = re.findall(r"/recall\?id=([0-9a-f]{12})", page.text)[0]
            recall, _ = await _timed(
                lambda: client.get(f"/s/{SESSION_ID}/recall", params={"id": memory_id})
            )
            charts, drawn = await _timed(lambda: client.get(f"/s/{SESSION_ID}/charts"))
            assert drawn.status_code == 200
    print(
        f"{kind:6} {len(entries):,} entries: reopen {opened * 1000:.0f} ms; session page "
        f"first {first * 1000:.0f} ms, median {statistics.median(later) * 1000:.0f} ms "
        f"({len(page.content) / 1024:.0f} KiB); older timeline page {back * 1000:.0f} ms; "
        f"recall {recall * 1000:.0f} ms; charts {charts * 1000:.0f} ms "
        f"({len(drawn.content) / 1024:.0f} KiB)",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.inspect_page", description=__doc__)
    parser.add_argument("--size", type=int, default=100_000, help="entries (default 100000)")
    parser.add_argument("--repeat", type=int, default=3, help="page samples after the first")
    parser.add_argument("--adapters", default="sqlite,jsonl", help="sqlite,jsonl (default)")
    args = parser.parse_args(argv)
    for kind in [a.strip() for a in args.adapters.split(",") if a.strip()]:
        with tempfile.TemporaryDirectory(prefix="prism-inspect-bench-") as tmp:
            asyncio.run(run(kind, args.size, args.repeat, Path(tmp)))


if __name__ == "__main__":
    main()
