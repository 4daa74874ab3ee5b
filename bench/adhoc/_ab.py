"""Shared pieces of the old-vs-new A/B scripts in this directory (page3_ab, recall2_ab,
recall3_ab, pgreads_ab, page4_ab, pg_ab_figures): an older tree importable beside this
one, and medians."""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")

Call = Callable[[], Awaitable[Any]]


def old_tree(rev: str) -> str:
    """A directory holding ``prism_om_old``: the package at ``rev``."""
    out = tempfile.mkdtemp(prefix="prism-old-")
    archive = subprocess.run(
        ["git", "-C", ROOT, "archive", rev, "prism_om", "schema.sql"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", out], input=archive, check=True)
    os.rename(os.path.join(out, "prism_om"), os.path.join(out, "prism_om_old"))
    return out


async def medians(call: Call, n: int) -> tuple[float, float]:
    """Median wall and CPU µs per call."""
    wall, cpu = [], []
    for _ in range(n):
        started, used = time.perf_counter_ns(), time.process_time_ns()
        await call()
        wall.append(time.perf_counter_ns() - started)
        cpu.append(time.process_time_ns() - used)
    return statistics.median(wall) / 1000, statistics.median(cpu) / 1000
