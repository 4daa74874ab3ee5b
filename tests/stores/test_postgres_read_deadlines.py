"""Bounded PostgreSQL reads share one deadline timer (``stores/postgres/deadlines``).

Counted, not timed: the timers the event loop is asked for across many bounded reads
(``asyncio.timeout`` asked for one per read). What a deadline does is unchanged: a read
past it raises ``TimeoutError`` (``StoreBusyError`` at the reader:
``test_postgres_read_timeout``), any other cancellation stays a cancellation.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from prism_om.observational_memory import recall_observational_memory
from prism_om.stores.postgres import PostgresStore
from prism_om.stores.postgres.deadlines import ReadDeadlines
from prism_om.testing.memory_conformance import load_builder

from ..observational_memory.test_recall import Story


async def test_many_bounded_reads_ask_for_one_timer(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    story = Story()
    async with await PostgresStore.open(postgres_url) as store:
        await load_builder(store, story.builder)
        loop = asyncio.get_running_loop()
        timers: list[float] = []
        call_at = loop.call_at

        def counted(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
            # The driver and the pool set short timers of their own: a read's deadline
            # is the store's timeout_s (30 s here) + 1 s away.
            if when - loop.time() > 20:
                timers.append(when)
            return call_at(when, *args, **kwargs)

        monkeypatch.setattr(loop, "call_at", counted)
        for _ in range(20):
            got = await recall_observational_memory(store, story.o1, session_id="s1")
            assert got.found
            assert await store.leaf("s1") == story.m5.id
        assert len(timers) <= 1


async def test_a_read_past_its_deadline_times_out_and_the_next_is_watched() -> None:
    deadlines = ReadDeadlines(0.05)
    with pytest.raises(TimeoutError):
        await deadlines.run(asyncio.sleep(10))
    assert await deadlines.run(asyncio.sleep(0, "done")) == "done"
    # Reads started later keep their own, later deadline.
    fast, slow = deadlines.run(asyncio.sleep(0.01, "fast")), deadlines.run(asyncio.sleep(10))
    results = await asyncio.gather(fast, slow, return_exceptions=True)
    assert results[0] == "fast" and isinstance(results[1], TimeoutError)
    deadlines.close()


async def test_another_cancellation_is_not_a_timeout() -> None:
    deadlines = ReadDeadlines(30)
    task = asyncio.create_task(deadlines.run(asyncio.sleep(10)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # wait_for's own timeout, shorter than the read's deadline, stays wait_for's.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(deadlines.run(asyncio.sleep(10)), 0.01)
    deadlines.close()
