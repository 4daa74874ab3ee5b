"""Reopening a current SQLite file: the work between the call and the first row, counted.

The path probe (a plain ``sqlite3.connect``, kept so that an unopenable path is reported
before aiosqlite starts a thread for it) runs in place: a hop to a worker thread and back
costs more than the probe itself. No clock is read here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from prism_om.entries import message_entry
from prism_om.errors import StoreError
from prism_om.stores.sqlite import SqliteStore

TS = "2026-01-01T00:00:00.000Z"


def counted_thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``asyncio.to_thread`` call (a hop to the default executor) while patched."""
    calls: list[str] = []
    real = asyncio.to_thread

    async def counting(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        calls.append(getattr(func, "__name__", repr(func)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counting)
    return calls


async def test_reopening_a_current_file_makes_no_executor_hop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    async with await SqliteStore.open(path) as store:
        await store.append(message_entry("s", "user", "hi", entry_id="a", timestamp=TS))
    hops = counted_thread_hops(monkeypatch)
    async with await SqliteStore.open(path) as store:
        assert await store.leaf("s") == "a"
        assert [m.id for m in await store.recent_messages("s", 20)] == ["a"]
    # The probe took one before (asyncio.to_thread(_probe)).
    assert hops == []


async def test_an_unopenable_path_is_still_reported_before_a_thread_starts(
    tmp_path: Path,
) -> None:
    missing_dir = tmp_path / "no-such-dir" / "s.db"
    with pytest.raises(StoreError, match="open on sqlite:"):
        await SqliteStore.open(missing_dir)
    with pytest.raises(StoreError, match="open on sqlite:"):
        await SqliteStore.open(tmp_path)  # a directory
