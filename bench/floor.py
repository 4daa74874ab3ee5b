"""The floor (plain ``sqlite3`` on the same rows) and the aiosqlite round trip (idle and busy).

The floor table holds what our SQLite adapter must at least write per entry, in the
row shape of schema version 4: the envelope in columns (id, session, parent, kind,
timestamp), a token count made with the same estimator, and the payload JSON in body (a
message's message object: ``prism_om.stores._rows.payload_json``), in WAL mode with
``synchronous=NORMAL`` like the adapter. Its appends include encoding the rows
(``payload_json`` and ``count_entry``), as ours do; its reads select the columns and
``json.loads`` the bodies (ours build ``SessionEntry`` objects instead). The branch read
is also timed on the rows of schema version 3 (the whole wire JSON in body), as
``floor (sqlite3, v3 rows)``, to show what the row shape changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import aiosqlite

from prism_om.entries import SessionEntry
from prism_om.stores._rows import payload_json
from prism_om.tokens import get_estimator

from .data import SESSION_ID, Dataset
from .model import FLOOR, FLOOR_V3, REFERENCE, REFERENCE_BUSY, Result
from .paired import RoundTrip
from .timing import Timer, sync, time_calls
from .workloads import AppendSample

__all__ = ["aiosqlite_round_trips", "busy_core", "run_floor"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    parent_id TEXT,
    kind TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    body TEXT NOT NULL
)"""
_INSERT = (
    "INSERT INTO entries (id, session_id, parent_id, kind, timestamp, tokens, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
# The columns a read of whole entries selects, as our adapter does.
_COLUMNS = "id, session_id, parent_id, kind, timestamp, body"


def _rows(entries: Sequence[SessionEntry]) -> list[tuple[Any, ...]]:
    est = get_estimator()
    return [
        (e.id, e.session_id, e.parent_id, e.kind, e.timestamp, est.count_entry(e), payload_json(e))
        for e in entries
    ]


def _v3_branch_floor(dataset: Dataset, workdir: str, timer: Timer) -> Any:
    """The branch floor on rows of schema version 3: the whole wire JSON in body."""
    path = os.path.join(workdir, f"floor-v3-{dataset.size}.db")
    conn = _connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS entries (seq INTEGER PRIMARY KEY, body TEXT)")
    for i in range(0, dataset.size, 10_000):
        chunk = dataset.entries[i : i + 10_000]
        conn.executemany("INSERT INTO entries (body) VALUES (?)", [(e.to_json(),) for e in chunk])
    conn.commit()

    def branch() -> list[Any]:
        rows = conn.execute("SELECT body FROM entries ORDER BY seq").fetchall()
        return [json.loads(body) for (body,) in rows]

    async def measure() -> list[float]:
        try:
            return await timer.measure(sync(branch))
        finally:
            conn.close()

    return measure


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


async def run_floor(
    dataset: Dataset, sample: AppendSample, workdir: str, timer: Timer
) -> list[Result]:
    """Every floor workload at one size."""
    size = dataset.size
    path = os.path.join(workdir, f"floor-{size}.db")
    conn = _connect(path)
    conn.execute(_SCHEMA)
    for i in range(0, size, 10_000):
        conn.executemany(_INSERT, _rows(dataset.entries[i : i + 10_000]))
    conn.commit()
    results: list[Result] = []

    def add(workload: str, samples: list[float], note: str = "") -> None:
        results.append(Result(workload, FLOOR, size, samples, note=note))

    def branch() -> list[Any]:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM entries WHERE session_id = ? ORDER BY seq", (SESSION_ID,)
        ).fetchall()
        return [(*row[:5], json.loads(row[5])) for row in rows]

    cursor = dataset.middle_message_id()

    def page() -> list[Any]:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM entries WHERE session_id = ? AND seq > "
            "(SELECT seq FROM entries WHERE id = ?) ORDER BY seq LIMIT 21",
            (SESSION_ID, cursor),
        ).fetchall()
        return [(*row[:5], json.loads(row[5])) for row in rows]

    _, source_id = dataset.middle_memory_id()

    def lookup() -> Any:
        row = conn.execute(f"SELECT {_COLUMNS} FROM entries WHERE id = ?", (source_id,)).fetchone()
        return (*row[:5], json.loads(row[5]))

    v3_branch = _v3_branch_floor(dataset, workdir, timer)
    add("branch", await timer.measure(sync(branch)), note="SELECT + json.loads")
    results.append(
        Result("branch", FLOOR_V3, size, await v3_branch(), note="SELECT + json.loads, v3 rows")
    )
    add("page20", await timer.measure(sync(page)), note="seq range LIMIT 21 + json.loads")
    results.append(Result("page20_raw", FLOOR, size, results[-1].samples, note=results[-1].note))
    add("recall", await timer.measure(sync(lookup)), note="primary-key lookup + json.loads")
    conn.close()

    def cold() -> list[Any]:
        c = _connect(path)
        rows = c.execute(
            f"SELECT {_COLUMNS} FROM entries WHERE session_id = ? ORDER BY seq DESC LIMIT 20",
            (SESSION_ID,),
        ).fetchall()
        c.close()
        return [(*row[:5], json.loads(row[5])) for row in rows]

    add("cold_start", await timer.measure(sync(cold)), note="connect + last 20 rows")

    conn = _connect(path)

    def batch_call(entries: list[SessionEntry]) -> Any:
        async def call() -> None:
            conn.executemany(_INSERT, _rows(entries))
            conn.commit()

        return call

    def single_call(entry: SessionEntry) -> Any:
        async def call() -> None:
            conn.execute(_INSERT, _rows([entry])[0])
            conn.commit()

        return call

    samples, _ = await time_calls([batch_call(b) for b in sample.batches], groups=timer.repeat)
    add("append_batch", samples, note="encode + executemany + commit")
    samples, _ = await time_calls([single_call(e) for e in sample.singles], groups=timer.repeat)
    add("append_single", samples, note="encode + insert + commit")
    conn.close()
    return results


# How long the busy process gets to start spinning before the busy round trip is timed.
_SPINNER_WARMUP_S = 0.3


@contextlib.asynccontextmanager
async def aiosqlite_round_trips(workdir: str) -> AsyncIterator[list[RoundTrip]]:
    """One ``execute_fetchall("SELECT 1")`` on an open aiosqlite connection, twice.

    The SQLite recall and page are paired with it round by round (``bench.paired``):
    once idle, once while a child process spins on another core (``REFERENCE_BUSY``),
    when aiosqlite's hop wakes its thread faster, so a target met only against the
    slower, idle round trip is not met (see ``bench/model``). The busy one is left out on
    a one-core machine, where a spinner would only steal the loop's core.
    """
    conn = await aiosqlite.connect(os.path.join(workdir, "rtt.db"))

    async def select_one() -> object:
        return await conn.execute_fetchall("SELECT 1")

    trips = [
        RoundTrip(
            REFERENCE,
            select_one,
            contextlib.nullcontext,
            "execute_fetchall('SELECT 1'), open connection",
        )
    ]
    if (os.cpu_count() or 1) >= 2:
        trips.append(
            RoundTrip(
                REFERENCE_BUSY,
                select_one,
                busy_core,
                "the same, while a child process spins on another core",
            )
        )
    try:
        yield trips
    finally:
        await conn.close()


@contextlib.contextmanager
def busy_core() -> Iterator[None]:
    """A child process that keeps one core busy until the block ends."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(_SPINNER_WARMUP_S)
        yield
    finally:
        spinner.kill()
        spinner.wait()
