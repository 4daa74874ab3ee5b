"""Start writer processes together and check a session entry by entry afterwards.

Shared by ``tests/stores/test_postgres_concurrency.py`` and
``python -m bench.postgres_concurrency``.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pg_append_worker.py")


@dataclass(frozen=True)
class Writer:
    """One writer process: MODE, session, tag, count and optional parent (see the worker)."""

    mode: str
    session_id: str
    tag: str
    count: int
    parent: str | None = None


def run_writers(url: str, writers: Sequence[Writer]) -> list[float]:
    """Run the writers as processes, started together; each one's seconds of appending."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = []
    for w in writers:
        args = [sys.executable, WORKER, url, w.mode, w.session_id, w.tag, str(w.count)]
        if w.parent is not None:
            args.append(w.parent)
        procs.append(
            subprocess.Popen(
                args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        )
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"writer did not start: {line!r} {proc.stderr!r}")
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        times = []
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"writer failed ({proc.returncode}): {err}")
            times.append(float(out.split()[-1]))
        return times
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@dataclass
class Found:
    """What a session holds after the writers: counted entry by entry."""

    entries: int
    leaves: int
    problems: list[str]


async def check_session(
    store: Any, session_id: str, chains: dict[str, int], root: str | None = None
) -> Found:
    """Check ``session_id`` holds exactly the chains ``{tag: count}`` (and ``root``).

    With ``root``, each tag's chain is its own branch under ``root`` (explicit parents):
    the session has one leaf per tag, each branch is root then that tag's entries in
    order. Without it, the writers appended at the leaf: one branch, each entry's parent
    the entry before it, every tag's entries present once and in their own order.
    """
    problems: list[str] = []
    leaves = await store.leaves(session_id)
    total = 0
    if root is None:
        branch = await store.entries(session_id)
        total = len(branch)
        if len(leaves) != 1:
            problems.append(f"{session_id}: {len(leaves)} leaves, expected 1 (a fork)")
        for before, entry in zip([None, *branch], branch, strict=False):
            expected_parent = before.id if before is not None else None
            if entry.parent_id != expected_parent:
                problems.append(f"{entry.id}: parent {entry.parent_id!r} != {expected_parent!r}")
        for tag, count in chains.items():
            mine = [e.id for e in branch if e.id.rsplit("-", 1)[0] == tag]
            if mine != [f"{tag}-{n}" for n in range(count)]:
                problems.append(f"{session_id}/{tag}: {len(mine)} of {count} entries, or reordered")
        if total != sum(chains.values()):
            problems.append(f"{session_id}: {total} entries, expected {sum(chains.values())}")
        return Found(total, len(leaves), problems)
    if sorted(leaves) != sorted(f"{tag}-{count - 1}" for tag, count in chains.items()):
        problems.append(f"{session_id}: leaves {sorted(leaves)[:8]} are not one per writer")
    total = 1
    for tag, count in chains.items():
        branch = await store.entries(session_id, f"{tag}-{count - 1}")
        ids = [e.id for e in branch]
        if ids != [root, *(f"{tag}-{n}" for n in range(count))]:
            problems.append(f"{session_id}/{tag}: branch of {len(ids)} is not root + its chain")
        for before, entry in itertools.pairwise(branch):
            if entry.parent_id != before.id:
                problems.append(f"{entry.id}: parent {entry.parent_id!r} != {before.id!r}")
        total += len(ids) - 1
    return Found(total, len(leaves), problems)
