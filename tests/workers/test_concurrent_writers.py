"""Memory workers and the agent loop under concurrent writers (issue 13, items 2 and 3)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

from prism_om.core.records import OBSERVATIONS_RECORDED
from prism_om.entries import SessionEntry
from prism_om.host import Agent
from prism_om.providers import ProviderEvent, ProviderRequest, ScriptedProvider
from prism_om.session import Session
from prism_om.stores import SessionStore, open_store
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime

ADAPTERS = ["memory", "jsonl", "sqlite"]


def store_url(kind: str, tmp_path: Path) -> str:
    if kind == "memory":
        return "memory:"
    return f"jsonl:{tmp_path / 'store'}" if kind == "jsonl" else f"sqlite:{tmp_path / 'store.db'}"


def offline_runtime(session: Session, append_entry: Any = None, **kwargs: Any) -> Any:
    worker = {"provider": OfflineMemoryProvider(), "model": "offline"}
    return create_observational_memory_runtime(
        session=session,
        append_entry=append_entry or session.append,
        observation=worker,
        reflection=worker,
        dropper={"policy": "lowest-relevance"},
        **kwargs,
    )


async def fill(session: Session, messages: int) -> None:
    for i in range(messages):
        role = "user" if i % 2 == 0 else "assistant"
        await session.append_message(role, f"message {i}: the billing migration step {i}")


async def observation_records(store: SessionStore, sid: str) -> list[SessionEntry]:
    return [e for e in await store.list(sid) if e.custom_type == OBSERVATIONS_RECORDED]


def assert_observed_once(records: list[SessionEntry]) -> None:
    """No message is the source of two observations; no coverage is recorded twice."""
    assert records
    covers = Counter((r.data or {})["coversUpToId"] for r in records)
    assert max(covers.values()) == 1, covers
    sources = Counter(
        s for r in records for o in (r.data or {})["observations"] for s in o["sourceEntryIds"]
    )
    assert max(sources.values()) == 1


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_gathered_runtimes_record_each_observation_once(kind: str, tmp_path: Path) -> None:
    store = await open_store(store_url(kind, tmp_path))
    try:
        session = Session(store, "s")
        await fill(session, 30)
        results = await asyncio.gather(
            *(offline_runtime(session).flush(force=True) for _ in range(3))
        )
        assert [r.status for r in results] == ["completed"] * 3
        observers = [r.outcome("observer") for r in results]
        assert sum(o is not None and o.status == "ran" for o in observers) == 1
        assert {o.reason for o in observers if o is not None and o.status == "skipped"} <= {
            "stale_coverage",
            "nothing_to_observe",
        }
        assert_observed_once(await observation_records(store, "s"))
        assert len(await store.leaves("s")) == 1
    finally:
        await store.close()


class GatedProvider(OfflineMemoryProvider):
    """The offline provider, held before its first answer until ``gate`` is set."""

    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__()
        self.gate = gate
        self.waiting = asyncio.Event()

    async def generate(self, request: ProviderRequest) -> AsyncGenerator[ProviderEvent, None]:
        self.waiting.set()
        await self.gate.wait()
        async for event in super().generate(request):
            yield event


@pytest.mark.parametrize("keyword", [True, False])
async def test_a_run_overtaken_by_another_worker_stores_nothing(keyword: bool) -> None:
    store = await open_store("memory:")
    session = Session(store, "s")
    await fill(session, 10)

    async def plain(entry: SessionEntry) -> None:  # a host append without the keyword
        await session.append(entry)

    gate = asyncio.Event()
    slow = GatedProvider(gate)
    worker = {"provider": slow, "model": "offline"}
    overtaken = create_observational_memory_runtime(
        session=session,
        append_entry=session.append if keyword else plain,
        observation=worker,
        reflection=worker,
        dropper={"policy": "lowest-relevance"},
    )
    pending = asyncio.ensure_future(overtaken.flush(force=True))
    await slow.waiting.wait()  # it has read the memory head and is asking its model
    first = await offline_runtime(session).flush(force=True)
    assert first.observation_ids
    gate.set()
    result = await pending
    observer = result.outcome("observer")
    assert observer is not None and (observer.status, observer.reason) == (
        "skipped",
        "stale_coverage",
    )
    assert not result.observation_ids
    assert_observed_once(await observation_records(store, "s"))


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_a_turn_landing_after_a_memory_record_is_kept(kind: str, tmp_path: Path) -> None:
    store = await open_store(store_url(kind, tmp_path))
    try:
        session = Session(store, "s")
        await fill(session, 8)
        later: list[SessionEntry] = []

        async def then_next_turn(entry: SessionEntry, **options: Any) -> SessionEntry:
            stored = await session.append(entry, **options)
            # The agent's next turn lands before the runtime looks at where its record went.
            later.append(await session.append_message("user", "the next turn"))
            return stored

        result = await offline_runtime(session, then_next_turn).flush(force=True)
        assert result.status == "completed" and result.entry_ids
        # The leaf is never moved back over the later turns, and nothing forked.
        assert await store.leaf("s") == later[-1].id
        assert len(await store.leaves("s")) == 1
        branch = {e.id for e in await store.entries("s")}
        assert set(result.entry_ids) <= branch and {e.id for e in later} <= branch
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_agent_turns_and_a_background_flush_share_one_branch(
    kind: str, tmp_path: Path
) -> None:
    store = await open_store(store_url(kind, tmp_path))
    try:
        session = Session(store, "s")
        await fill(session, 12)
        agent = Agent(session, ScriptedProvider([[{"text": f"reply {n}"}] for n in range(6)]))
        runtime = offline_runtime(session)

        async def turns() -> None:
            for n in range(6):
                await agent.run(f"question {n}")

        _, flushed = await asyncio.gather(turns(), runtime.flush(force=True))
        assert flushed.status == "completed"
        assert len(await store.leaves("s")) == 1
        branch = await store.entries("s")
        assert len(branch) == len(await store.list("s")) == 12 + 12 + len(flushed.entry_ids)
    finally:
        await store.close()


# -- prism-om observe from several processes at once ------------------------------------


def _observe(url: str, cwd: Path) -> subprocess.Popen[str]:
    command = ["observe", "--session", "s", "--db", url, "--force", "--json"]
    return subprocess.Popen(
        [sys.executable, "-m", "prism_om.cli", *command],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_observe_processes_do_not_duplicate_memory(kind: str, tmp_path: Path) -> None:
    url = store_url(kind, tmp_path)
    async with await open_store(url) as store:
        await fill(Session(store, "s"), 200)
    processes = [_observe(url, tmp_path) for _ in range(3)]
    outputs = [p.communicate(timeout=180) for p in processes]
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err
        assert json.loads(out)["status"] == "completed"
    async with await open_store(url) as store:
        records = await observation_records(store, "s")
        assert_observed_once(records)
        assert len(await store.leaves("s")) == 1
        messages = [e for e in await store.list("s") if e.kind == "message"]
        observed = {
            s for r in records for o in (r.data or {})["observations"] for s in o["sourceEntryIds"]
        }
        assert observed <= {m.id for m in messages}
