"""Issue 13 figures (items 4, 17): ``PRAGMA quick_check`` at scale; one-session JSONL reads.

Usage: python bench/adhoc/integrity_figures.py [--entries N] [--sessions K] [--keep DIR]
       [--code DIR]

``--code DIR`` runs the timed commands with another checkout's ``prism_om`` first on
``PYTHONPATH`` (say a ``git archive`` of an older commit), for a before/after figure.

Builds a SQLite store and a JSONL directory of N messages (default 1,000,000) spread over
K sessions (default 48), then prints:

* ``PRAGMA quick_check`` wall time on the SQLite file (what ``prism-om check`` runs, and
  why it is never on the open path);
* wall time and peak RSS (GNU ``/usr/bin/time``) of ``prism-om status`` on one session
  and of ``prism-om sessions``, each in a fresh process, on the JSONL directory;
* ``prism-om check`` wall time on the JSONL directory (reads every session in full).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time

from prism_om.cli.check import sqlite_quick_check
from prism_om.entries import SessionEntry
from prism_om.stores import open_store
from prism_om.testing.generate import make_message

BATCH = 5_000


def chain(sid: str, n: int) -> list[SessionEntry]:
    out: list[SessionEntry] = []
    parent = None
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        e = make_message(sid, f"{sid}-{i}", parent, role, f"message {i} about {i % 97}", i)
        out.append(e)
        parent = e.id
    return out


async def build(url: str, entries: int, sessions: int) -> None:
    per = entries // sessions
    async with await open_store(url) as store:
        for k in range(sessions):
            batch = chain(f"s{k}", per)
            for start in range(0, per, BATCH):
                await store.append_many(batch[start : start + BATCH])


def timed_cli(*args: str, code: str | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one ``prism-om`` run, measured by ``time(1)``.

    Not by ``wait4`` here: a child forked from this process (which holds the stores it
    built) inherits its resident-set high-water mark across exec.
    """
    with tempfile.NamedTemporaryFile("r") as report:
        timer = ["/usr/bin/time", "-f", "%e %M", "-o", report.name]
        env = dict(os.environ)
        if code is not None:
            env["PYTHONPATH"] = os.pathsep.join([code, env.get("PYTHONPATH", "")])
        done = subprocess.run(
            [*timer, sys.executable, "-m", "prism_om.cli", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr.decode().strip().splitlines()[-1])
        wall, kilobytes = report.read().split()[-2:]
    return float(wall), int(kilobytes) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=48)
    parser.add_argument("--keep", help="build into (and keep) this directory")
    parser.add_argument("--code", help="run the timed commands with this prism_om")
    args = parser.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="prism-om-integrity-")
    os.makedirs(root, exist_ok=True)
    db, directory = os.path.join(root, "store.db"), os.path.join(root, "jsonl")
    try:
        for url, path in ((f"sqlite:{db}", db), (f"jsonl:{directory}", directory)):
            if not os.path.exists(path):
                start = time.perf_counter()
                asyncio.run(build(url, args.entries, args.sessions))
                print(f"built {url}: {time.perf_counter() - start:.1f} s", flush=True)
        size = os.path.getsize(db) / 2**20
        start = time.perf_counter()
        result = sqlite_quick_check(db)
        print(
            f"PRAGMA quick_check, {args.entries:,} entries ({size:.0f} MB): "
            f"{time.perf_counter() - start:.2f} s -> {result[:1]}"
        )
        for label, cli_args in (
            ("status --session s0", ("status", "--session", "s0", "--db", f"jsonl:{directory}")),
            ("sessions", ("sessions", "--db", f"jsonl:{directory}")),
            ("check (every session)", ("check", "--db", f"jsonl:{directory}")),
        ):
            try:
                wall, rss = timed_cli(*cli_args, code=args.code)
            except RuntimeError as exc:
                print(f"jsonl {label}: failed: {exc}", flush=True)
                continue
            print(f"jsonl {label}: {wall:.2f} s, peak RSS {rss:.0f} MB", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
