"""The work one SQLite append does, counted: statements and timestamp parses.

Each count is a property of the code, not of the machine (no clock is read): the
statements SQLite runs for an append (through its trace callback), how many timestamps
the session summary parses (the record parse: test_record_parsed_once.py).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from bench.data import SESSION_ID, build_dataset, continuation
from prism_om.core.timestamps import utc_timestamp
from prism_om.entries import message_entry
from prism_om.stores import _summary
from prism_om.stores._summary import latest_timestamp
from prism_om.stores.sql import placement as placement_module
from prism_om.stores.sqlite import SqliteStore

TS = "2026-06-01T00:00:00.000Z"


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    data = build_dataset(300)
    async with await SqliteStore.open(tmp_path / "s.db") as opened:
        await opened.append_many(data.entries)
        yield opened, data


async def statements_of(store: SqliteStore, call: Any) -> list[str]:
    """The statements the writer runs for ``call()`` (a write), in order."""
    seen: list[str] = []
    raw = store._writer._conn
    assert raw is not None
    # The trace callback runs on the writer's thread, where the statements run.
    await store._writer._execute(raw.set_trace_callback, lambda sql: seen.append(sql))
    try:
        await call()
    finally:
        await store._writer._execute(raw.set_trace_callback, None)
    heads = [" ".join(sql.split()[:3]) for sql in seen]
    # executemany is one statement, traced once per row (with its values): count it once.
    return [head for n, head in enumerate(heads) if n == 0 or head != heads[n - 1]]


async def test_an_append_of_messages_runs_six_statements(store: Any) -> None:
    s, data = store
    more = continuation(data, 101, "x")
    batch = await statements_of(s, lambda: s.append_many(more[:100]))
    one = await statements_of(s, lambda: s.append(more[100]))
    for statements in (batch, one):
        # BEGIN, the state and the parents (one statement), the leaf, the summary, the
        # rows, COMMIT: the state and parents reads were two statements before, and the
        # search index's rows one more before a message's were left to the first search.
        assert len(statements) == 6, statements
        assert not any("search_terms" in sql for sql in statements)
        assert statements[0] == "BEGIN IMMEDIATE"
        assert statements[-1] == "COMMIT"
        assert sum(s.startswith("INSERT INTO entries") for s in statements) == 1


async def test_the_summary_parses_one_timestamp_per_batch(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, data = store
    calls: list[object] = []

    def counting(value: object) -> str | None:
        calls.append(value)
        return utc_timestamp(value)

    monkeypatch.setattr(_summary, "utc_timestamp", counting)
    more = continuation(data, 100, "x")
    await s.append_many(more)
    # Only the latest is parsed, where every one of the 100 was before.
    assert calls == [more[-1].timestamp]
    (summary,) = await s.session_summaries()
    assert summary.last_activity == utc_timestamp(more[-1].timestamp)


def test_latest_timestamp_answers_as_the_max_of_every_parse() -> None:
    rng = random.Random(16)
    pieces = {
        "year": ["2026", "0001", "9999", "1999"],
        "month": ["01", "02", "12", "13"],
        "day": ["01", "28", "29", "30", "31"],
        "hour": ["00", "23", "24"],
        "fraction": ["", ".123", ".5", ".000", ".999999"],
        "zone": ["Z", "+02:00", "-05:30", "", "+00:00"],
    }

    def stamp() -> object:
        p = {k: rng.choice(v) for k, v in pieces.items()}
        text = f"{p['year']}-{p['month']}-{p['day']}T{p['hour']}:59:{rng.choice(['00', '60'])}"
        return rng.choice([text + p["fraction"] + p["zone"], None, 5, "", "not a time"])

    for _ in range(3000):
        values = [stamp() for _ in range(rng.randint(0, 8))]
        expected = max(filter(None, map(utc_timestamp, values)), default=None)
        assert latest_timestamp(values) == expected, values


async def test_a_batch_of_messages_skips_the_memory_record_walk(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, data = store
    calls: list[object] = []

    def counting(real: Any) -> Any:
        def count(*args: Any) -> Any:
            calls.append(args[0])
            return real(*args)

        return count

    # Whichever the append calls per entry (record_needs now, memory_record_needs before).
    for name in ("record_needs", "memory_record_needs"):
        real = getattr(placement_module, name, None)
        if real is not None:
            monkeypatch.setattr(placement_module, name, counting(real))
    await s.append_many(continuation(data, 100, "x"))
    # No message carries a record: the walk asked each of the 100 for one before.
    assert calls == []


async def test_a_batch_with_more_outside_parents_than_one_lookup_holds(tmp_path: Path) -> None:
    data = build_dataset(1200)
    async with await SqliteStore.open(tmp_path / "wide.db") as s:
        await s.append_many(data.entries)
        # 600 forks, each under another stored message: past the 500 ids one read names.
        parents = [e for e in data.entries if e.kind == "message"][:600]
        forks = [
            message_entry(
                SESSION_ID, "user", f"fork {n}", parent_id=p.id, entry_id=f"f{n}", timestamp=TS
            )
            for n, p in enumerate(parents)
        ]
        statements = await statements_of(s, lambda: s.append_many(forks))
        # The state, the first 500 parents, then the other 100: one read more, no more.
        assert sum(st.startswith("SELECT") for st in statements) == 2
        # Either side of the 500th, where the second read takes over.
        for n in (0, 499, 500, 599):
            fork, parent = forks[n], parents[n]
            got = await s.entries(SESSION_ID, fork.id)
            assert [e.id for e in got[-2:]] == [parent.id, fork.id]
