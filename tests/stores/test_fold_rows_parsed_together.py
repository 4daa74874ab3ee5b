"""SQLite and PostgreSQL rebuild memory from fold rows with one validation call per kind
(issue 16: a pydantic call per live observation was a third of a turn's ledger), and a
fold row damaged outside the API is still refused."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bench.data import SESSION_ID, build_dataset, capped_entries
from prism_om.core.records import Observation, Reflection
from prism_om.errors import CorruptStoreError
from prism_om.stores.base import SessionStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.conformance import StoreOpener


def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each one-body validation of an observation or reflection."""
    calls: list[str] = []
    for model in (Observation, Reflection):
        original = model.model_validate_json

        def one(body: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            calls.append(body)
            return _original(body, *args, **kwargs)

        monkeypatch.setattr(model, "model_validate_json", one)
    return calls


@pytest.fixture(params=["sqlite", "postgres"])
async def sql_store(
    request: pytest.FixtureRequest, make_opener: Callable[[str], StoreOpener], tmp_path: Path
) -> AsyncIterator[SessionStore]:
    """Only the SQL adapters keep fold rows."""
    (tmp_path / request.param).mkdir()
    opened = await make_opener(request.param).open()
    try:
        yield opened
    finally:
        await opened.close()


async def test_the_live_pool_is_validated_in_one_call(
    sql_store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = sql_store
    await store.append_many(capped_entries(build_dataset(1200), target_tokens=400))
    calls = counted(monkeypatch)
    live = await store.live_ledger(SESSION_ID)
    full = await store.ledger(SESSION_ID)
    assert len(live.observations) > 10 and len(full.observations) > len(live.observations)
    assert calls == []  # one call per body before


async def damaged(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "d.db"
    async with await SqliteStore.open(path) as store:
        await store.append_many(capped_entries(build_dataset(600), target_tokens=400))
    with sqlite3.connect(path) as raw:
        seq, ordinal = raw.execute(
            "SELECT entry_seq, ordinal FROM om_live WHERE kind = 0 ORDER BY entry_seq LIMIT 1"
        ).fetchone()
        raw.execute(
            "UPDATE om_observations SET body = ? WHERE entry_seq = ? AND ordinal = ?",
            (body, seq, ordinal),
        )
    return path


@pytest.mark.parametrize(
    "body",
    [
        '{"id": "000000000001", "text": ""}',
        '{"id": "000000000001"',
        '{"id": "000000000001", "text": "a", "sourceEntryIds": ["e1"]}, '
        '{"id": "000000000002", "text": "b", "sourceEntryIds": ["e2"]}',
    ],
    ids=["invalid", "not-json", "two-values"],
)
async def test_a_damaged_fold_row_is_still_refused(tmp_path: Path, body: str) -> None:
    path = await damaged(tmp_path, body)
    async with await SqliteStore.open(path) as store:
        with pytest.raises(CorruptStoreError, match="no longer parses") as caught:
            await store.live_ledger(SESSION_ID)
        assert caught.value.session_id == SESSION_ID
