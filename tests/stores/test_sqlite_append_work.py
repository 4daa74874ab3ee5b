"""The work one SQLite append does, counted: statements, entry rows, timestamp parses.

Each count is a property of the code, not of the machine (no clock is read): the
statements the store's connections run for an append, counted at the driver
(``support.sql_work``), how many timestamps the session summary parses (the record parse:
test_record_parsed_once.py). The Python calls of a batch: test_sqlite_append_batch_work.py.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from support.sql_work import Traced, statements

from bench.data import SESSION_ID, build_dataset, continuation
from prism_om.core.timestamps import utc_timestamp
from prism_om.entries import message_entry
from prism_om.errors import DuplicateEntryError
from prism_om.stores import _summary
from prism_om.stores._summary import latest_timestamp
from prism_om.stores.sql import placement as placement_module
from prism_om.stores.sqlite import SqliteStore

TS = "2026-06-01T00:00:00.000Z"


@pytest.fixture
async def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    data = build_dataset(300)
    with statements(monkeypatch) as traced:
        opened = await SqliteStore.open(tmp_path / "s.db")
    async with opened:
        await opened.append_many(data.entries)
        yield opened, data, traced


async def statements_of(traced: Traced, call: Any) -> list[str]:
    """The statements every connection runs for ``call()``, housekeeping included, each
    by its first three words; a statement run for several rows in a row counts once."""
    with traced.counting() as run:
        await call()
    heads = [" ".join(sql.split()[:3]) for sql in run.everything]
    return [head for n, head in enumerate(heads) if n == 0 or head != heads[n - 1]]


def inserts(sql: list[str]) -> int:
    return sum(s.lstrip().startswith("INSERT INTO entries") for s in sql)


async def test_an_append_of_messages_runs_six_statements(store: Any) -> None:
    s, data, traced = store
    more = continuation(data, 101, "x")
    batch = await statements_of(traced, lambda: s.append_many(more[:100]))
    one = await statements_of(traced, lambda: s.append(more[100]))
    for seen in (batch, one):
        # BEGIN, the state and the parents (one statement), the leaf, the summary, the
        # rows, COMMIT: the state and parents reads were two statements before, and the
        # search index's rows one more before a message's were left to the first search.
        assert len(seen) == 6, seen
        assert not any("search_blocks" in sql for sql in seen)
        assert seen[0] == "BEGIN IMMEDIATE"
        assert seen[-1] == "COMMIT"
        assert inserts(seen) == 1
    branch = await s.entries(SESSION_ID)
    assert branch[-101:] == more


async def test_an_append_costs_the_same_on_a_session_ten_times_longer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    costs = []
    for size in (300, 3000):
        data = build_dataset(size)
        with statements(monkeypatch) as traced:
            opened = await SqliteStore.open(tmp_path / f"s{size}.db")
        async with opened:
            await opened.append_many(data.entries)
            more = continuation(data, 11, "x")
            with traced.counting() as batch:
                await opened.append_many(more[:10])
            with traced.counting() as one:
                await opened.append(more[10])
            costs.append((batch.count, batch.rows, one.count, one.rows))
    assert costs[0] == costs[1], costs


async def test_a_failed_append_leaves_nothing(store: Any) -> None:
    s, data, _ = store
    more = continuation(data, 3, "x")
    await s.append(more[0])
    await s.append_many(more[1:])
    assert await s.leaf(SESSION_ID) == more[-1].id
    with pytest.raises(DuplicateEntryError, match="already"):
        await s.append(more[0])
    assert await s.leaf(SESSION_ID) == more[-1].id
    assert len(await s.entries(SESSION_ID)) == len(data.entries) + 3


# -- the entry rows: a few multi-row INSERTs, not one step per row ---------------------


async def test_a_batch_of_100_inserts_its_rows_in_three_statements(store: Any) -> None:
    s, data, traced = store
    more = continuation(data, 101, "x")
    with traced.counting() as batch:
        await s.append_many(more[:100])
    # 64 + 32 + 4 rows; executemany traced (and stepped) each of the 100 rows alone.
    assert inserts(batch.everything) == 3, batch.everything
    with traced.counting() as one:
        await s.append(more[100])
    assert inserts(one.everything) == 1
    branch = await s.entries(data.entries[0].session_id)
    assert branch[-101:] == more


@pytest.mark.parametrize("count", [1, 2, 3, 7, 63, 64, 65, 100, 127, 128, 129, 1000, 1001])
async def test_a_batch_stores_every_row_once_in_order_in_few_inserts(
    count: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each INSERT names at most 64 rows (a power of two of them, under SQLite's smallest
    # default limit of bound values): one statement per power of two below that, after
    # the full ones.
    entries = [
        message_entry("b", "user", f"m{n}", parent_id=f"m{n - 1}" if n else None, entry_id=f"m{n}")
        for n in range(count)
    ]
    with statements(monkeypatch) as traced:
        opened = await SqliteStore.open(tmp_path / "b.db")
    async with opened:
        with traced.counting() as run:
            await opened.append_many(entries)
        assert inserts(run.everything) <= count // 64 + 6, run.count
        assert await opened.entries("b") == entries
        assert await opened.list("b") == entries


async def test_a_stored_id_in_a_later_insert_is_refused_with_the_store_unchanged(
    store: Any,
) -> None:
    s, data, _ = store
    session = data.entries[0].session_id
    more = continuation(data, 100, "x")
    before = await s.entries(session)
    leaf = await s.leaf(session)
    # Entry 80 (in the second INSERT) reuses a stored id: the first 64 rows went in first.
    clash = more[80].model_copy(update={"id": data.entries[5].id})
    fixed = [*more[:80], clash, *(e.model_copy() for e in more[81:])]
    fixed[81] = fixed[81].model_copy(update={"parent_id": clash.id})
    with pytest.raises(DuplicateEntryError) as caught:
        await s.append_many(fixed)
    assert caught.value.entry_id == data.entries[5].id
    assert await s.entries(session) == before
    assert await s.leaf(session) == leaf
    await s.append_many(more)
    assert (await s.entries(session))[-100:] == more


async def test_the_summary_parses_one_timestamp_per_batch(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, data, _ = store
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
    # Private module kept: the walk reads and writes nothing, so neither the driver nor a
    # public call shows it; only a count of the function it calls per entry does.
    s, data, _ = store
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


async def test_a_batch_with_more_outside_parents_than_one_lookup_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = build_dataset(1200)
    with statements(monkeypatch) as traced:
        opened = await SqliteStore.open(tmp_path / "wide.db")
    async with opened as s:
        await s.append_many(data.entries)
        # 600 forks, each under another stored message: past the 500 ids one read names.
        parents = [e for e in data.entries if e.kind == "message"][:600]
        forks = [
            message_entry(
                SESSION_ID, "user", f"fork {n}", parent_id=p.id, entry_id=f"f{n}", timestamp=TS
            )
            for n, p in enumerate(parents)
        ]
        seen = await statements_of(traced, lambda: s.append_many(forks))
        # The state, the first 500 parents, then the other 100: one read more, no more.
        assert sum(st.startswith("SELECT") for st in seen) == 2
        # Either side of the 500th, where the second read takes over.
        for n in (0, 499, 500, 599):
            fork, parent = forks[n], parents[n]
            got = await s.entries(SESSION_ID, fork.id)
            assert [e.id for e in got[-2:]] == [parent.id, fork.id]
