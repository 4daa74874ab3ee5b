"""Peak memory of a cold start plus one turn, in a fresh process per adapter and size.

Run as ``python -m bench.memprobe ADAPTER URL SIZE``; prints ``{"baseline": bytes,
"peak": bytes}`` where ``baseline`` is the resident set after imports and ``peak`` is
``ru_maxrss`` at the end. The in-memory store has nothing to reopen: its probe loads the
dataset into a fresh ``MemoryStore`` instead.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys

__all__ = ["probe_peak_rss"]


def _maxrss() -> int:
    """Peak resident bytes of this process image.

    ``VmHWM`` first: on Linux ``ru_maxrss`` survives ``exec`` and so carries the parent's
    high-water mark through the fork (the bench parent holds the whole dataset), which
    made every probe report the parent's memory. ``ru_maxrss`` (kilobytes) elsewhere.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def probe_peak_rss(adapter: str, url: str, size: int) -> tuple[float, float]:
    """(peak, baseline) resident bytes of a child process that serves one turn."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.memprobe",
        adapter,
        url,
        str(size),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"memprobe {adapter} {size} failed: {err.decode()[-500:]}")
    data = json.loads(out.decode().strip().splitlines()[-1])
    return float(data["peak"]), float(data["baseline"])


async def _serve_one_turn(adapter: str, url: str, size: int) -> int:
    from prism_om.observational_memory import build_observational_memory_context_blocks
    from prism_om.stores import open_store

    from .data import SESSION_ID, build_dataset

    baseline = _maxrss()
    store = await open_store(url)
    try:
        if adapter == "memory":
            entries = build_dataset(size).entries
            for i in range(0, len(entries), 1000):
                await store.append_many(entries[i : i + 1000])
            del entries
        await store.leaf(SESSION_ID)
        await store.recent_messages(SESSION_ID, 20)
        await build_observational_memory_context_blocks(store, session_id=SESSION_ID)
    finally:
        await store.close()
    return baseline


def main(argv: list[str]) -> None:
    """Entry point of the child process."""
    adapter, url, size = argv[0], argv[1], int(argv[2])
    baseline = asyncio.run(_serve_one_turn(adapter, url, size))
    print(json.dumps({"baseline": baseline, "peak": _maxrss()}))


if __name__ == "__main__":
    main(sys.argv[1:])
