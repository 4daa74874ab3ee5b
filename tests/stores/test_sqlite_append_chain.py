"""A chain of messages appended to SQLite (issue 16, append_many of 100): the work counted,
and the rows it writes equal to the general path's, byte for byte.

A chain is a batch of messages each naming the one before as its parent (an agent's
turn, a transcript): only its first entry can break a tree rule, and its rows follow from
the first one's place. The counts are properties of the code (no clock is read).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench.data import build_dataset, continuation
from prism_om.entries import SessionEntry, message_entry
from prism_om.errors import RootExistsError, SessionMismatchError, UnknownParentError
from prism_om.stores.sql import placement as placement_module
from prism_om.stores.sql.placement import is_message_chain
from prism_om.stores.sql.statements import (
    CHAIN_ROW_VALUES,
    ENTRY_ROWS_PER_INSERT,
    insert_chain_statements,
)
from prism_om.stores.sqlite import SqliteStore
from prism_om.stores.sqlite import store as store_module
from prism_om.stores.sqlite.worker_thread import DirectConnection
from prism_om.tokens import HEURISTIC_ENCODING, get_estimator

TS = "2026-06-01T00:00:{:02d}.000Z"


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    data = build_dataset(300)
    async with await SqliteStore.open(tmp_path / "s.db") as opened:
        await opened.append_many(data.entries)
        yield opened, data


@contextmanager
def executed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, list[Any]]]]:
    """Every statement the write transaction executes, with its parameters."""
    seen: list[tuple[str, list[Any]]] = []
    real = DirectConnection.execute

    def execute(self: DirectConnection, sql: str, params: Any = ()) -> Any:
        seen.append((sql, list(params)))
        return real(self, sql, params)

    with monkeypatch.context() as patch:
        patch.setattr(DirectConnection, "execute", execute)
        yield seen


def counted(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Replace ``owner.name`` by a wrapper that records the length of its first sequence."""
    calls: list[int] = []
    real = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        sized = next((a for a in args if isinstance(a, list | tuple)), ())
        calls.append(len(sized))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


async def test_a_chain_of_100_binds_six_values_a_row(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, data = store
    more = continuation(data, 100, "x")
    with executed(monkeypatch) as seen:
        await s.append_many(more)
    bound = sum(
        len(params) for sql, params in seen if sql.lstrip().startswith("INSERT INTO entries")
    )
    # 6 per row plus 6 per statement (64 + 32 + 4 rows): 14 per row (1,400) before.
    assert bound == 100 * CHAIN_ROW_VALUES + 3 * 6
    assert await s.entries(data.entries[0].session_id) == [*data.entries, *more]


async def test_a_chain_is_checked_and_placed_at_its_first_entry_only(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, data = store
    placed = counted(monkeypatch, placement_module.Placer, "place")
    rules = counted(monkeypatch, store_module, "first_rule_failure")
    outside = counted(monkeypatch, store_module, "outside_parent_ids")
    await s.append_many(continuation(data, 100, "x"))
    # Each of the 100 entries was placed, rule-checked and scanned for its parent before.
    assert len(placed) == 1
    assert rules == [1]
    assert outside == [1]


async def test_the_chain_rules_still_refuse_at_the_first_entry(store: Any) -> None:
    s, data = store
    session = data.entries[0].session_id
    before = await s.entries(session)
    more = continuation(data, 100, "x")
    orphan = [more[0].model_copy(update={"parent_id": "nowhere"}), *more[1:]]
    with pytest.raises(UnknownParentError) as unknown:
        await s.append_many(orphan)
    assert unknown.value.entry_id == more[0].id
    root = [more[0].model_copy(update={"parent_id": None}), *more[1:]]
    with pytest.raises(RootExistsError):
        await s.append_many(root)
    other = message_entry("other", "user", "hi", entry_id="o1", timestamp=TS.format(0))
    await s.append(other)
    foreign = [more[0].model_copy(update={"parent_id": "o1"}), *more[1:]]
    with pytest.raises(SessionMismatchError):
        await s.append_many(foreign)
    assert await s.entries(session) == before


@pytest.mark.parametrize("count", [*range(1, 131), 1000])
def test_chain_statements_cover_every_row_once_in_order(count: int) -> None:
    values = list(range(count * CHAIN_ROW_VALUES))
    head = ("s", "enc", 10, 3, 7, "p")
    statements = list(insert_chain_statements(head, values))
    assert [v for _, params in statements for v in params[6:]] == values
    start = 0
    for sql, params in statements:
        size = (len(params) - 6) // CHAIN_ROW_VALUES
        assert size <= ENTRY_ROWS_PER_INSERT and size & (size - 1) == 0
        assert len(params) < 999  # SQLite's smallest default limit of bound values
        assert sql.count("?3 +") == size
        parent = "p" if start == 0 else values[(start - 1) * CHAIN_ROW_VALUES]
        assert params[:6] == ["s", "enc", 10 + start, 3 + start, 7, parent]
        start += size
    assert start == count


def test_only_a_chain_of_messages_is_a_chain() -> None:
    data = build_dataset(60)
    batch = continuation(data, 3, "x")
    assert is_message_chain(batch) and is_message_chain(batch[:1])
    # A fork inside the batch, a memory record, a message copied without its message.
    assert not is_message_chain(
        [batch[0], batch[1], batch[2].model_copy(update={"parent_id": batch[0].id})]
    )
    assert not is_message_chain([*batch, data.entries[50]])
    assert not is_message_chain([batch[0], batch[1].model_copy(update={"message": None})])


# -- the chain's rows equal the general path's ----------------------------------------


def _dump(path: Path) -> dict[str, list[Any]]:
    conn = sqlite3.connect(path)
    try:
        return {
            "entries": conn.execute(
                "SELECT *, typeof(seq), typeof(depth), typeof(path_tokens) FROM entries "
                "ORDER BY seq"
            ).fetchall(),
            "segments": conn.execute("SELECT * FROM segments ORDER BY segment_id").fetchall(),
            "sessions": conn.execute(
                "SELECT session_id, seq, root_id, leaf_id FROM sessions ORDER BY seq"
            ).fetchall(),
            "summary": conn.execute("SELECT * FROM session_summary ORDER BY 1").fetchall(),
        }
    finally:
        conn.close()


_ids = itertools.count()


def _chain(session: str, parent: str | None, size: int, second: int) -> list[SessionEntry]:
    chain = []
    for n in range(size):
        entry_id = f"c{next(_ids)}"
        role = ("user", "assistant")[n % 2]
        chain.append(
            message_entry(
                session,
                role,
                f"t {n}",
                parent_id=parent,
                entry_id=entry_id,
                timestamp=TS.format(second),
            )
        )
        parent = entry_id
    return chain


# (session, where the chain hangs: None for a root, -1 the last appended, k the k-th
# appended entry of that session, for a fork), its size, heuristic-counted or not.
_plans = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.one_of(st.none(), st.just(-1), st.integers(0, 40)),
        st.integers(1, 140),
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plans=_plans)
# A fork (a new segment), then a chain counted with another encoding (NULL path tokens
# from there on), then chains at the leaf across INSERT statements, in two sessions.
@example(plans=[("a", None, 5, False), ("a", 2, 3, True), ("a", -1, 70, False)])
@example(plans=[("a", None, 100, False), ("b", None, 1, True), ("a", -1, 130, False)])
async def test_chain_rows_equal_the_general_paths(
    plans: list[tuple[str, int | None, int, bool]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = next(_ids)
    paths = [tmp_path / f"chain-{run}.db", tmp_path / f"general-{run}.db"]
    heuristic = get_estimator(HEURISTIC_ENCODING)
    appended: dict[str, list[str]] = {}
    batches: list[tuple[list[SessionEntry], bool]] = []
    for second, (session, where, size, other_encoding) in enumerate(plans):
        ids = appended.setdefault(session, [])
        if not ids or where is None:
            parent = None if not ids else "missing-root"
        else:
            parent = ids[where % len(ids)]
        if parent == "missing-root":
            continue  # a second root would be refused on both paths alike
        batch = _chain(session, parent, size, second % 60)
        ids.extend(e.id for e in batch)
        batches.append((batch, other_encoding))
    for path, general in zip(paths, (False, True), strict=True):
        with monkeypatch.context() as patch:
            if general:
                patch.setattr(store_module, "is_message_chain", lambda batch: False)
            for batch, other_encoding in batches:
                # A path counted with two encodings keeps NULL path tokens after it.
                opened = await SqliteStore.open(
                    path, token_estimator=heuristic if other_encoding else None
                )
                async with opened as s:
                    await s.append_many(batch)
    assert _dump(paths[0]) == _dump(paths[1])
