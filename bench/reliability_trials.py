"""``python -m bench.reliability_trials``: kills, cancellations and racing writers, counted.

    python -m bench.reliability_trials [--trials N] [--cancel N] [--rounds N] [--seed S]
                                       [--keep DIR]

Prints four tables (all work in a temporary directory, removed at the end):

1. SIGKILL trials (``--trials`` per adapter and mode, default 50). ``append_many``: the
   crash workers of ``tests/support/crash_worker_{sqlite,jsonl}.py`` append batches of 1..50
   entries and print an ack line after each ``append_many`` returns; ``import``: a
   ``prism-om import --json`` of a generated 2,000-message OpenAI-chat JSON file (one batch;
   its JSON output is the ack). Each child is SIGKILLed at a random moment, then the store
   is reopened and checked: every acked batch whole, no batch partly present, a probe write
   accepted; at the end ``PRAGMA quick_check`` (SQLite) or ``JsonlStore.check()`` (JSONL).
2. Cancellation trials (``--cancel`` per adapter, default 300): ``append_many`` /
   ``append_at_leaf`` tasks cancelled after 0-3 ms, as in
   ``prism_om.testing.write_conformance``; then a probe write in-process and one from
   another process, and a reopen that must show the same entries.
3. Concurrent observers: three ``prism-om observe --force`` processes at once on one
   400-message session (offline workers), ``--rounds`` times per adapter (default 3).
4. Concurrent first appends: 6 processes x 10 ``Session.append_message`` on a new session,
   and ``asyncio.gather`` of 10 in-process, ``--rounds`` times per adapter.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prism_om.cli.check import sqlite_quick_check
from prism_om.core.records import OBSERVATIONS_RECORDED, REFLECTIONS_RECORDED
from prism_om.entries import SessionEntry, message_entry
from prism_om.session import Session
from prism_om.stores import open_store
from prism_om.stores.base import SessionStore
from prism_om.stores.jsonl import JsonlStore
from prism_om.testing.generate import make_message
from prism_om.testing.write_conformance import _chain, _present, run_in_subprocess

TESTS = Path(__file__).resolve().parents[1] / "tests"
WORKERS = {
    "sqlite": TESTS / "support" / "crash_worker_sqlite.py",
    "jsonl": TESTS / "support" / "crash_worker_jsonl.py",
}
IMPORT_MESSAGES = 2_000
OBSERVE_MESSAGES = 400
OBSERVERS = 3
WRITER_PROCESSES = 6
APPENDS_EACH = 10

# One process of table 4: COUNT appends at the leaf of SID, each one's outcome on a line.
_WRITER = """
import asyncio, sys, time
from prism_om.session import Session
from prism_om.stores import open_store

async def main(url, sid, count, tag, start_at):
    store = await open_store(url)
    try:
        session = Session(store, sid)
        await asyncio.sleep(max(0.0, start_at - time.time()))
        for n in range(count):
            try:
                entry = await session.append_message("user", f"{tag}-{n}")
            except Exception as exc:
                print("rejected", type(exc).__name__, str(exc)[:200].replace(chr(10), " "))
            else:
                print("ok", entry.id)
    finally:
        await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5])))
"""


def url_for(adapter: str, root: Path, name: str) -> str:
    if adapter == "memory":
        return "memory:"
    return f"sqlite:{root / (name + '.db')}" if adapter == "sqlite" else f"jsonl:{root / name}"


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "prism_om.cli", *args]


def short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


# -- 1. SIGKILL ---------------------------------------------------------------------------------


@dataclass
class KillRow:
    adapter: str
    mode: str
    trials: int = 0
    acked_batches: int = 0
    acked_entries: int = 0
    unacked_whole: int = 0  # batches stored whole whose ack the kill cut off
    absent: int | str = "-"  # import: killed before its batch was stored
    torn: int | str = "-"  # JSONL: kills that left bytes past the committed length
    lost_entries: int = 0
    partial_batches: int = 0
    reopen_failures: int = 0
    probe_failures: int = 0
    branch_not_one_chain: int = 0
    integrity: str = ""
    notes: list[str] = field(default_factory=list)


def _kill_child(cmd: list[str], out: Path, rng: random.Random, early: bool, window: float) -> str:
    """Start ``cmd``, SIGKILL it at a random moment, return what it printed.

    ``early``: a delay from spawn in [0, 0.5 s) (startup and opening); else wait for its
    first line (ready, or the first ack) and kill within ``window`` seconds after it.
    """
    with out.open("wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.DEVNULL)
    try:
        if early:
            time.sleep(rng.uniform(0, 0.5))
        else:
            deadline = time.monotonic() + 60
            while not out.read_bytes() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0, window))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    return out.read_text(errors="replace")


def _jsonl_torn(directory: Path, session: str) -> bool:
    """True when the session file holds bytes past its sidecar's committed length: the kill
    landed inside a batch's write (read from disk before the store is reopened)."""
    data = directory / f"{session}.jsonl"
    if not data.exists():
        return False
    try:
        committed = json.loads((directory / f"{session}.leaf.json").read_text())["committedBytes"]
    except (OSError, ValueError, KeyError):
        committed = 0
    return data.stat().st_size > committed


async def _reopen(row: KillRow, url: str, label: str) -> SessionStore | None:
    """The store reopened (None, counted, when it fails); a kill before the store was ever
    created leaves nothing to reopen, so that case opens with ``create``."""
    exists = await asyncio.to_thread(os.path.exists, url.split(":", 1)[1])
    if not exists:
        row.notes.append(f"{label}: killed before the store existed")
    try:
        return await open_store(url, create=not exists)
    except Exception as exc:
        row.reopen_failures += 1
        row.notes.append(f"{label}: reopen {short(exc)}")
        return None


async def _probe(store: SessionStore, session: str, entry_id: str) -> None:
    await store.append_at_leaf([message_entry(session, "user", "probe", entry_id=entry_id)])


async def _check_sqlite_kill(row: KillRow, url: str, session: str, acked: dict[int, int]) -> None:
    store = await _reopen(row, url, session)
    if store is None:
        return
    try:
        stored = await store.list(session)
        batches: dict[int, list[tuple[int, int]]] = {}
        for entry in stored:
            _, k, n, i = entry.id.split(".")
            batches.setdefault(int(k[1:]), []).append((int(n[1:]), int(i[1:])))
        for number, members in batches.items():
            size = members[0][0]
            if sorted(i for _, i in members) != list(range(size)):
                row.partial_batches += 1
                row.notes.append(f"{session}: batch {number} has {len(members)}/{size}")
            elif number not in acked:
                row.unacked_whole += 1
        for number, size in acked.items():
            present = len(batches.get(number, ()))
            row.lost_entries += max(0, size - present)
            if present < size:
                row.notes.append(f"{session}: acked batch {number} has {present}/{size}")
        if [e.id for e in await store.entries(session)] != [e.id for e in stored]:
            row.branch_not_one_chain += 1
        try:
            await _probe(store, session, f"probe-{session}")
        except Exception as exc:
            row.probe_failures += 1
            row.notes.append(f"{session}: probe {short(exc)}")
    finally:
        await store.close()


async def _check_jsonl_kill(
    row: KillRow, url: str, round_no: int, acked: dict[str, int], seen_before: set[str]
) -> None:
    store = await _reopen(row, url, f"round {round_no}")
    if store is None:
        return
    try:
        stored = await store.list("crash")
        batches: dict[str, list[SessionEntry]] = {}
        for entry in stored:
            if entry.id.startswith("r"):
                batches.setdefault(entry.id.rsplit(".", 1)[0], []).append(entry)
        for batch_id, members in batches.items():
            if batch_id in seen_before:
                continue
            seen_before.add(batch_id)
            assert members[0].message is not None
            size = int(str(members[0].message.content).split()[0])
            if [e.id for e in members] != [f"{batch_id}.{i}" for i in range(size)]:
                row.partial_batches += 1
                row.notes.append(f"round {round_no}: batch {batch_id} has {len(members)}/{size}")
            elif batch_id not in acked:
                row.unacked_whole += 1
        for batch_id, size in acked.items():
            present = len(batches.get(batch_id, ()))
            row.lost_entries += max(0, size - present)
            if present < size:
                row.notes.append(f"round {round_no}: acked {batch_id} has {present}/{size}")
        if [e.id for e in await store.entries("crash")] != [e.id for e in stored]:
            row.branch_not_one_chain += 1
        try:
            await _probe(store, "crash", f"probe{round_no}")
        except Exception as exc:
            row.probe_failures += 1
            row.notes.append(f"round {round_no}: probe {short(exc)}")
    finally:
        await store.close()


async def _jsonl_integrity(directory: Path) -> str:
    async with await JsonlStore.open(directory, read_only=True) as store:
        results = await store.check()
    damaged = [r for r in results if r.problem is not None]
    uncommitted = sum(1 for r in results if r.uncommitted_bytes)
    return f"check: {len(damaged)} damaged, {uncommitted} with uncommitted bytes"


def kill_append_many(adapter: str, root: Path, trials: int, rng: random.Random) -> KillRow:
    row = KillRow(adapter, "append_many", torn=0 if adapter == "jsonl" else "-")
    url = url_for(adapter, root, f"kill-{adapter}")
    target = url.split(":", 1)[1]
    seen: set[str] = set()
    for n in range(trials):
        if adapter == "sqlite":
            cmd = [sys.executable, str(WORKERS[adapter]), "crash", target, f"t{n}", str(n)]
        else:
            cmd = [sys.executable, str(WORKERS[adapter]), "crash", target, str(n), str(n)]
        text = _kill_child(cmd, root / "out.txt", rng, early=n % 10 == 0, window=0.15)
        lines = [line for line in text.splitlines(keepends=True) if line.endswith("\n")]
        row.trials += 1
        if adapter == "jsonl":
            assert isinstance(row.torn, int)
            row.torn += _jsonl_torn(Path(target), "crash")
        if adapter == "sqlite":
            acked = {int(k): int(s) for k, s in (line.split() for line in lines)}
            asyncio.run(_check_sqlite_kill(row, url, f"t{n}", acked))
        else:
            ends = [line.split() for line in lines if line.startswith("committed")]
            acked_j = {batch_id: int(size) for _, batch_id, size in ends}
            asyncio.run(_check_jsonl_kill(row, url, n, acked_j, seen))
            acked = dict(enumerate(acked_j.values()))
        row.acked_batches += len(acked)
        row.acked_entries += sum(acked.values())
    row.integrity = (
        f"quick_check: {sqlite_quick_check(target)[0]}"
        if adapter == "sqlite"
        else asyncio.run(_jsonl_integrity(Path(target)))
    )
    return row


def _chat_file(path: Path) -> None:
    records = []
    for i in range(IMPORT_MESSAGES):
        role = "user" if i % 2 == 0 else "assistant"
        records.append({"role": role, "content": f"chat line {i} about {i % 41} " + "y" * 80})
    path.write_text(json.dumps(records))


async def _check_import(row: KillRow, url: str, session: str, acked: bool) -> None:
    store = await _reopen(row, url, session)
    if store is None:
        return
    try:
        count = len(await store.list(session))
        if 0 < count < IMPORT_MESSAGES:
            row.partial_batches += 1
            row.notes.append(f"{session}: {count}/{IMPORT_MESSAGES} entries")
        elif count == IMPORT_MESSAGES and not acked:
            row.unacked_whole += 1
        elif count == 0:
            assert isinstance(row.absent, int)
            row.absent += 1
            if session in await store.sessions():
                row.notes.append(f"{session}: listed with no entries")
        if acked and count < IMPORT_MESSAGES:
            row.lost_entries += IMPORT_MESSAGES - count
            row.notes.append(f"{session}: acked import has {count}/{IMPORT_MESSAGES}")
        try:
            await _probe(store, "probe", f"probe-{session}")
        except Exception as exc:
            row.probe_failures += 1
            row.notes.append(f"{session}: probe {short(exc)}")
    finally:
        await store.close()


def kill_import(adapter: str, root: Path, trials: int, rng: random.Random) -> KillRow:
    row = KillRow(adapter, "import", absent=0)
    url = url_for(adapter, root, f"import-{adapter}")
    target = url.split(":", 1)[1]
    chat = root / "chat.json"
    if not chat.exists():
        _chat_file(chat)
    # How long an unkilled import runs: the even trials' kills land in 0.25-1.5x of it.
    durations = []
    for n in range(2):
        start = time.perf_counter()
        subprocess.run(
            cli("import", "--json", "--session", f"cal{n}", "--db", url, str(chat)),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        durations.append(time.perf_counter() - start)
    full = first = min(durations)
    if adapter == "jsonl":
        row.torn = 0
    out = root / "out.txt"
    wal = Path(f"{target}-wal")
    for n in range(trials):
        session = f"imp{n}"

        def writing(session: str = session) -> bool:
            if adapter == "jsonl":
                return (Path(target) / f"{session}.leaf.json").exists()
            return wal.exists() and wal.stat().st_size > 0

        spawned = time.monotonic()
        with out.open("wb") as sink:
            proc = subprocess.Popen(
                cli("import", "--json", "--session", session, "--db", url, str(chat)),
                stdout=sink,
                stderr=subprocess.DEVNULL,
            )
        if n % 2 == 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=rng.uniform(0.25 * full, 1.5 * full))
        else:
            deadline = time.monotonic() + 60
            while proc.poll() is None and not writing() and time.monotonic() < deadline:
                time.sleep(0.0005)
            # The run's length follows the store's size (a JSONL writer loads every
            # session first), so the even trials' window follows the latest write start.
            full = max(first, (time.monotonic() - spawned) * 1.15)
            time.sleep(rng.uniform(0, 0.01))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if adapter == "jsonl":
            assert isinstance(row.torn, int)
            row.torn += _jsonl_torn(Path(target), session)
        acked = False
        if proc.returncode == 0:
            with contextlib.suppress(ValueError, KeyError):
                acked = json.loads(out.read_text())["entries"] == IMPORT_MESSAGES
        row.trials += 1
        if acked:
            row.acked_batches += 1
            row.acked_entries += IMPORT_MESSAGES
        asyncio.run(_check_import(row, url, session, acked))
    row.notes.append(
        f"an unkilled import took {first:.2f} s on the new store, {full:.2f} s by the end; "
        "even trials killed at 0.25-1.5x that, odd ones 0-10 ms after the write begins "
        "(JSONL: the session's sidecar appears; SQLite: the WAL grows)"
    )
    row.integrity = (
        f"quick_check: {sqlite_quick_check(target)[0]}"
        if adapter == "sqlite"
        else asyncio.run(_jsonl_integrity(Path(target)))
    )
    return row


# -- 2. cancellation ----------------------------------------------------------------------------


@dataclass
class CancelRow:
    adapter: str
    calls: int = 0
    cancelled: int = 0
    completed: int = 0
    cancelled_whole: int = 0
    cancelled_absent: int = 0
    stored_partly: int = 0
    errors: int = 0
    probe_in_process: str = "-"
    probe_other_process: str = "-"
    changed_after: int = 0  # cancelled batches whose presence changed later, or acked lost
    notes: list[str] = field(default_factory=list)


async def cancel_trials(adapter: str, root: Path, calls: int, rng: random.Random) -> CancelRow:
    row = CancelRow(adapter)
    url = url_for(adapter, root, f"cancel-{adapter}")
    errors: Counter[str] = Counter()
    store = await open_store(url)
    try:
        await store.append(make_message("c", "root", None, "user", "root", 0))
        acked: list[list[SessionEntry]] = []
        cancelled: list[tuple[list[SessionEntry], int]] = []
        for n in range(calls):
            batch = _chain("c", f"b{n}", rng.randint(1, 4), "root")
            call = store.append_at_leaf(batch) if n % 2 else store.append_many(batch)
            task: asyncio.Future[object] = asyncio.ensure_future(call)
            await asyncio.sleep(rng.uniform(0, 0.003))
            task.cancel()
            row.calls += 1
            try:
                await task
            except asyncio.CancelledError:
                row.cancelled += 1
                seen = await _present(store, batch)
                if seen == len(batch):
                    row.cancelled_whole += 1
                elif seen == 0:
                    row.cancelled_absent += 1
                else:
                    row.stored_partly += 1
                    row.notes.append(f"b{n}: {seen}/{len(batch)} stored")
                cancelled.append((batch, seen))
            except Exception as exc:
                row.errors += 1
                errors[short(exc)] += 1
            else:
                row.completed += 1
                acked.append(batch)
        try:
            await _probe(store, "c", "probe-in-process")
            row.probe_in_process = "ok"
        except Exception as exc:
            row.probe_in_process = "FAILED"
            row.notes.append(f"in-process probe: {short(exc)}")
        if adapter != "memory":
            try:
                await run_in_subprocess(store.url, "c", 1, "probe-other-process")
                row.probe_other_process = "ok"
            except Exception as exc:
                row.probe_other_process = "FAILED"
                row.notes.append(f"other-process probe: {short(exc)}"[:300])
            await store.close()
            store = await open_store(url)
        for batch in acked:
            if await _present(store, batch) != len(batch):
                row.changed_after += 1
                row.notes.append(f"acked {batch[0].id} not whole after reopen")
        for batch, seen in cancelled:
            if await _present(store, batch) != seen:
                row.changed_after += 1
                row.notes.append(f"cancelled {batch[0].id}: {seen} then more")
        texts = [str(e.message.content) for e in await store.list("c") if e.message]
        if adapter != "memory" and "probe-other-process-0" not in texts:
            row.notes.append("the other process's probe is not in the store")
    finally:
        await store.close()
    row.notes.extend(f"error x{count}: {text}" for text, count in errors.items())
    return row


# -- 3. concurrent observers --------------------------------------------------------------------


@dataclass
class ObserveRow:
    adapter: str
    rounds: int = 0
    processes: int = 0
    exit_ok: int = 0
    exit_failed: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    observer: Counter[str] = field(default_factory=Counter)  # outcomes: ran / skip reason
    reflector: Counter[str] = field(default_factory=Counter)
    obs_records: int = 0
    distinct_covers: int = 0
    refl_records: int = 0
    forked_rounds: int = 0
    notes: list[str] = field(default_factory=list)


async def _build_session(url: str, sid: str, count: int) -> None:
    async with await open_store(url) as store:
        batch: list[SessionEntry] = []
        parent = None
        for i in range(count):
            role = "user" if i % 2 == 0 else "assistant"
            text = f"message {i} about topic {i % 37}: decided to use tool {i % 5} for {i * 7}"
            batch.append(make_message(sid, f"{sid}-{i}", parent, role, text, i))
            parent = batch[-1].id
        await store.append_many(batch)


async def _count_records(row: ObserveRow, url: str, sid: str) -> None:
    async with await open_store(url, create=False) as store:
        entries = await store.list(sid)
        observed = [e for e in entries if e.custom_type == OBSERVATIONS_RECORDED]
        row.obs_records += len(observed)
        row.distinct_covers += len({(e.data or {}).get("coversUpToId") for e in observed})
        row.refl_records += sum(1 for e in entries if e.custom_type == REFLECTIONS_RECORDED)
        if len(await store.leaves(sid)) > 1:
            row.forked_rounds += 1


def concurrent_observers(adapter: str, root: Path, rounds: int) -> ObserveRow:
    row = ObserveRow(adapter)
    for r in range(rounds):
        url = url_for(adapter, root, f"observe-{adapter}-{r}")
        asyncio.run(_build_session(url, "obs", OBSERVE_MESSAGES))
        outs = [root / f"observe-{adapter}-{r}-{k}.out" for k in range(OBSERVERS)]
        procs = []
        for out in outs:
            with out.open("wb") as sink:
                args = cli("observe", "--force", "--json", "--session", "obs", "--db", url)
                procs.append(subprocess.Popen(args, stdout=sink, stderr=subprocess.PIPE))
        for proc, out in zip(procs, outs, strict=True):
            _, err = proc.communicate(timeout=300)
            row.processes += 1
            if proc.returncode == 0:
                row.exit_ok += 1
            else:
                row.exit_failed += 1
                last = err.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
                row.notes.append(f"round {r}: exit {proc.returncode}: {last[0][:200]}")
            try:
                result = json.loads(out.read_text())
            except ValueError:
                row.statuses["no JSON"] += 1
                continue
            row.statuses[str(result.get("status"))] += 1
            for outcome in result.get("outcomes") or ():
                tally = {"observer": row.observer, "reflector": row.reflector}
                if outcome.get("worker") in tally:
                    what = outcome.get("reason") or outcome.get("status")
                    tally[outcome["worker"]][str(what)] += 1
        row.rounds += 1
        asyncio.run(_count_records(row, url, "obs"))
    return row


# -- 4. concurrent first appends ----------------------------------------------------------------


@dataclass
class FirstRow:
    adapter: str
    how: str
    rounds: int = 0
    attempted: int = 0
    acked: int = 0
    rejected: int = 0
    crashed: int = 0
    leaves: list[int] = field(default_factory=list)
    on_branch: int = 0
    acked_off_branch: int = 0
    stored: int = 0
    notes: Counter[str] = field(default_factory=Counter)


async def _tally_first(row: FirstRow, store: SessionStore, sid: str, acked: set[str]) -> None:
    branch = {e.id for e in await store.entries(sid)}
    row.leaves.append(len(await store.leaves(sid)))
    row.on_branch += len(branch)
    row.acked_off_branch += len(acked - branch)
    row.stored += len(await store.list(sid))


def first_appends_processes(adapter: str, root: Path, rounds: int) -> FirstRow:
    row = FirstRow(adapter, f"{WRITER_PROCESSES} processes x {APPENDS_EACH}")
    url = url_for(adapter, root, f"first-{adapter}")
    asyncio.run(_build_session(url, "other", 1))  # the store exists before the race
    for r in range(rounds):
        sid = f"new{r}"
        start_at = time.time() + 1.5
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _WRITER,
                    url,
                    sid,
                    str(APPENDS_EACH),
                    f"w{k}",
                    str(start_at),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for k in range(WRITER_PROCESSES)
        ]
        acked: set[str] = set()
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            row.attempted += APPENDS_EACH
            if proc.returncode != 0:
                row.crashed += 1
                row.notes[(err.strip().splitlines() or ["?"])[-1][:200]] += 1
            for line in out.splitlines():
                kind, _, rest = line.partition(" ")
                if kind == "ok":
                    acked.add(rest)
                elif kind == "rejected":
                    row.rejected += 1
                    row.notes[rest[:200]] += 1
        row.acked += len(acked)
        row.rounds += 1

        async def tally(sid: str = sid, acked: set[str] = acked) -> None:
            async with await open_store(url, create=False) as store:
                await _tally_first(row, store, sid, acked)

        asyncio.run(tally())
    return row


async def first_appends_gather(adapter: str, root: Path, rounds: int) -> FirstRow:
    row = FirstRow(adapter, f"gather of {APPENDS_EACH}")
    async with await open_store(url_for(adapter, root, f"gather-{adapter}")) as store:
        for r in range(rounds):
            sid = f"g{r}"
            session = Session(store, sid)
            results = await asyncio.gather(
                *(session.append_message("user", f"m{n}") for n in range(APPENDS_EACH)),
                return_exceptions=True,
            )
            acked = {e.id for e in results if isinstance(e, SessionEntry)}
            for result in results:
                if isinstance(result, BaseException):
                    row.rejected += 1
                    row.notes[short(result)] += 1
            row.attempted += APPENDS_EACH
            row.acked += len(acked)
            row.rounds += 1
            await _tally_first(row, store, sid, acked)
    return row


# -- output -------------------------------------------------------------------------------------


KILL_COLUMNS = [
    ("adapter", "adapter"),
    ("mode", "mode"),
    ("trials", "trials"),
    ("acked batches", "acked_batches"),
    ("acked entries", "acked_entries"),
    ("whole unacked", "unacked_whole"),
    ("absent", "absent"),
    ("torn on disk", "torn"),
    ("lost entries", "lost_entries"),
    ("partial batches", "partial_batches"),
    ("reopen fail", "reopen_failures"),
    ("probe fail", "probe_failures"),
    ("not one chain", "branch_not_one_chain"),
]
CANCEL_COLUMNS = [
    ("adapter", "adapter"),
    ("calls", "calls"),
    ("cancelled", "cancelled"),
    ("completed", "completed"),
    ("cancelled+whole", "cancelled_whole"),
    ("cancelled+absent", "cancelled_absent"),
    ("stored partly", "stored_partly"),
    ("errors", "errors"),
    ("probe here", "probe_in_process"),
    ("probe other proc", "probe_other_process"),
    ("changed after", "changed_after"),
]
OBSERVE_COLUMNS = [
    ("adapter", "adapter"),
    ("rounds", "rounds"),
    ("processes", "processes"),
    ("exit 0", "exit_ok"),
    ("exit !=0", "exit_failed"),
    ("statuses", lambda o: tally(o.statuses)),
    ("observer runs", lambda o: tally(o.observer)),
    ("reflector runs", lambda o: tally(o.reflector)),
    ("observation records", "obs_records"),
    ("distinct coversUpToId", "distinct_covers"),
    ("duplicates", lambda o: o.obs_records - o.distinct_covers),
    ("reflection records", "refl_records"),
    ("forked rounds", "forked_rounds"),
]
FIRST_COLUMNS = [
    ("adapter", "adapter"),
    ("how", "how"),
    ("rounds", "rounds"),
    ("attempted", "attempted"),
    ("acked", "acked"),
    ("rejected", "rejected"),
    ("crashed procs", "crashed"),
    ("leaves per round", lambda f: ",".join(map(str, f.leaves))),
    ("on branch", "on_branch"),
    ("stored", "stored"),
    ("acked off branch", "acked_off_branch"),
]


def tally(counts: Counter[str]) -> str:
    return ",".join(f"{k}:{n}" for k, n in sorted(counts.items()))


def table(columns: Sequence[tuple[str, Any]], rows: Sequence[object]) -> str:
    """Rows as aligned text: each column a header and an attribute name or a function."""

    def cell(row: object, how: Any) -> str:
        return str(getattr(row, how) if isinstance(how, str) else how(row))

    cells = [[h for h, _ in columns], *[[cell(r, how) for _, how in columns] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = []
    for n, r in enumerate(cells):
        pairs = zip(r, widths, strict=True)
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(pairs)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def notes(label: str, items: Sequence[str]) -> None:
    for item in items[:12]:
        print(f"  {label}: {item}")
    if len(items) > 12:
        print(f"  {label}: ... {len(items) - 12} more")


def since(t0: float) -> str:
    return f"[{time.perf_counter() - t0:.0f} s]"


def run_all(args: argparse.Namespace, root: Path, rng: random.Random) -> None:
    t0 = time.perf_counter()
    kills = []
    for adapter in ("sqlite", "jsonl"):
        for run in (kill_append_many, kill_import):
            kills.append(run(adapter, root, args.trials, rng))
    print(
        f"\n1. SIGKILL trials (acked: the child printed an ack after the call returned) {since(t0)}"
    )
    print(table(KILL_COLUMNS, kills))
    for k in kills:
        notes(f"{k.adapter} {k.mode}", [k.integrity, *k.notes])

    t0 = time.perf_counter()
    cancels = [
        asyncio.run(cancel_trials(adapter, root, args.cancel, rng))
        for adapter in ("memory", "jsonl", "sqlite")
    ]
    print(f"\n2. Cancellation trials, delays 0-3 ms, append_many / append_at_leaf  {since(t0)}")
    print(table(CANCEL_COLUMNS, cancels))
    for c in cancels:
        notes(c.adapter, c.notes)

    t0 = time.perf_counter()
    observers = [concurrent_observers(a, root, args.rounds) for a in ("jsonl", "sqlite")]
    print(
        f"\n3. Concurrent observers: {OBSERVERS} x 'prism-om observe --force' at once on one "
        f"{OBSERVE_MESSAGES}-message session per round  {since(t0)}"
    )
    print(table(OBSERVE_COLUMNS, observers))
    for o in observers:
        notes(o.adapter, o.notes)

    t0 = time.perf_counter()
    firsts = [first_appends_processes(a, root, args.rounds) for a in ("jsonl", "sqlite")]
    firsts += [
        asyncio.run(first_appends_gather(a, root, args.rounds))
        for a in ("memory", "jsonl", "sqlite")
    ]
    print(f"\n4. Concurrent first appends on a new session  {since(t0)}")
    print(table(FIRST_COLUMNS, firsts))
    for f in firsts:
        notes(f"{f.adapter} {f.how}", [f"x{n} {t}" for t, n in f.notes.items()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=50, help="SIGKILLs per adapter and mode")
    parser.add_argument("--cancel", type=int, default=300, help="cancelled calls per adapter")
    parser.add_argument("--rounds", type=int, default=3, help="observer and first-append rounds")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--keep", help="work in (and keep) this directory")
    args = parser.parse_args()
    started = time.perf_counter()
    root = Path(args.keep or tempfile.mkdtemp(prefix="prism-om-reliability-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, seed {args.seed}", flush=True)
    try:
        run_all(args, root, random.Random(args.seed))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nwall time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
