"""Peers on the same machine and messages: SQLiteSession, AsyncSqliteSaver, om-memory.

Each runner prepares its store in bulk (untimed, through the peer's own write path or,
for AsyncSqliteSaver, its own serializer and INSERT), then times the workloads it shares
with us. A peer that fails to import or run is reported, and the run goes on. Every
peer runs under ``no_network()``: a socket connect raises and is counted, so the report
can state that no request was made.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any

from prism_om.entries import SessionEntry
from prism_om.tokens import get_estimator

from .data import SESSION_ID, Dataset
from .model import Result
from .timing import Timer, time_calls
from .workloads import AppendSample

__all__ = ["NETWORK_ATTEMPTS", "PEER_RUNNERS", "PeerRunner", "no_network"]

PeerRunner = Callable[[Dataset, AppendSample, str, Timer], Awaitable[list[Result]]]
NETWORK_ATTEMPTS: list[str] = []
"""Every socket connect attempted while a peer ran (should stay empty)."""

# om-memory's add_message reads the whole thread: cap its fixed sample by time.
SLOW_APPEND_BUDGET_S = 10.0


@contextlib.contextmanager
def no_network() -> Iterator[None]:
    """Refuse (and record) every outgoing socket connection inside the block."""
    original_connect = socket.socket.connect
    original_create = socket.create_connection

    def refuse(*args: Any, **kwargs: Any) -> Any:
        NETWORK_ATTEMPTS.append(repr(args[1:2] or args[:1]))
        raise ConnectionRefusedError("the benchmark allows no network access")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse
    try:
        yield
    finally:
        socket.socket.connect = original_connect  # type: ignore[method-assign]
        socket.create_connection = original_create


def _text(entry: SessionEntry) -> str:
    return entry.message.text() if entry.message is not None else ""


def _item(entry: SessionEntry) -> Any:
    """The Responses-style input item a SQLiteSession user would store."""
    return {"role": entry.role, "content": _text(entry)}


def _calls(fn: Callable[[Any], Awaitable[Any]], args: list[Any]) -> list[Callable[[], Any]]:
    def bind(arg: Any) -> Callable[[], Awaitable[Any]]:
        async def call() -> Any:
            return await fn(arg)

        return call

    return [bind(a) for a in args]


async def _reopen(timer: Timer, open_and_read: Callable[[], Awaitable[Any]]) -> list[float]:
    samples: list[float] = []
    for attempt in range(timer.repeat + 1):
        start = time.perf_counter()
        closer = await open_and_read()
        took = time.perf_counter() - start
        await closer()
        if attempt:
            samples.append(took)
    return samples


# -- OpenAI Agents SDK ---------------------------------------------------------------------


async def run_sqlite_session(
    dataset: Dataset, sample: AppendSample, workdir: str, timer: Timer
) -> list[Result]:
    """``agents.SQLiteSession`` on a file (its defaults: WAL, synchronous=FULL)."""
    from agents import SQLiteSession

    name, size = "SQLiteSession", dataset.size
    path = os.path.join(workdir, f"agents-{size}.db")
    items = [_item(e) for e in dataset.messages]
    results: list[Result] = []

    def add(workload: str, samples: list[float], note: str = "") -> None:
        results.append(Result(workload, name, size, samples, note=note))

    session = SQLiteSession(SESSION_ID, path)
    try:
        for i in range(0, len(items), 1000):
            await session.add_items(items[i : i + 1000])
        add("branch", await timer.measure(lambda: session.get_items()), note="get_items()")
        add(
            "page20",
            await timer.measure(lambda: session.get_items(limit=20)),
            note="get_items(limit=20): the tail only",
        )
    finally:
        session.close()

    async def open_and_read() -> Callable[[], Awaitable[None]]:
        fresh = SQLiteSession(SESSION_ID, path)
        await fresh.get_items(limit=20)

        async def close() -> None:
            fresh.close()

        return close

    add("cold_start", await _reopen(timer, open_and_read), note="construct + get_items(20)")

    session = SQLiteSession(SESSION_ID, path)
    try:
        batches = [[_item(e) for e in b] for b in sample.batches]
        samples, _ = await time_calls(_calls(session.add_items, batches), timer.repeat)
        add("append_batch", samples, note="add_items(100 items)")
        singles = [[_item(e)] for e in sample.singles]
        samples, made = await time_calls(_calls(session.add_items, singles), timer.repeat)
        add("append_single", samples, note=f"add_items([item]) x {made:,}")
    finally:
        session.close()
    return results


# -- LangGraph ----------------------------------------------------------------------------


def _checkpoint_id(n: int) -> str:
    # Zero-padded hex sorts like the number, as LangGraph's time-ordered ids do.
    return str(uuid.UUID(int=n + 1))


async def run_async_sqlite_saver(
    dataset: Dataset, sample: AppendSample, workdir: str, timer: Timer
) -> list[Result]:
    """LangGraph's ``AsyncSqliteSaver``: one checkpoint per message, each the next's parent."""
    import json

    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    name, size = "AsyncSqliteSaver", dataset.size
    path = os.path.join(workdir, f"langgraph-{size}.db")
    messages = dataset.messages
    results: list[Result] = []

    def add(workload: str, samples: list[float], note: str = "") -> None:
        results.append(Result(workload, name, size, samples, note=note))

    def checkpoint(n: int, entry: SessionEntry) -> tuple[dict[str, Any], Any, Any, Any]:
        cp: Any = empty_checkpoint()
        cp["id"] = _checkpoint_id(n)
        cp["ts"] = entry.timestamp
        cp["channel_values"] = {"messages": [_item(entry)]}
        cp["channel_versions"] = {"messages": n + 1}
        cp["updated_channels"] = ["messages"]
        parent = _checkpoint_id(n - 1) if n else None
        config = {
            "configurable": {"thread_id": SESSION_ID, "checkpoint_ns": "", "checkpoint_id": parent}
        }
        metadata = {"source": "loop", "step": n, "parents": {}}
        return config, cp, metadata, {"messages": n + 1}

    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.setup()
        rows = []
        for n, entry in enumerate(messages):
            config, cp, metadata, _ = checkpoint(n, entry)
            type_, blob = saver.serde.dumps_typed(cp)
            rows.append(
                (
                    SESSION_ID,
                    "",
                    cp["id"],
                    config["configurable"]["checkpoint_id"],
                    type_,
                    blob,
                    json.dumps(metadata).encode(),
                )
            )
        await saver.conn.executemany(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        await saver.conn.commit()
        del rows
        thread: Any = {"configurable": {"thread_id": SESSION_ID, "checkpoint_ns": ""}}

        async def list_all() -> list[Any]:
            return [t async for t in saver.alist(thread)]

        async def list_20() -> list[Any]:
            return [t async for t in saver.alist(thread, limit=20)]

        middle = _checkpoint_id(len(messages) // 2)
        by_id = {"configurable": {**thread["configurable"], "checkpoint_id": middle}}
        add("branch", await timer.measure(list_all), note="alist(thread): every checkpoint")
        add("page20", await timer.measure(list_20), note="alist(thread, limit=20): newest")
        add("recall", await timer.measure(lambda: saver.aget_tuple(by_id)), note="aget_tuple(id)")  # type: ignore[arg-type]

        first = len(messages) + len(sample.batches) * 100  # ids after the prepared ones
        puts = [checkpoint(first + i, e) for i, e in enumerate(sample.singles)]

        async def put(args: tuple[Any, Any, Any, Any]) -> Any:
            return await saver.aput(*args)

        samples, made = await time_calls(_calls(put, puts), timer.repeat)
        add("append_single", samples, note=f"aput per message x {made:,}")

    async def open_and_read() -> Callable[[], Awaitable[None]]:
        manager = AsyncSqliteSaver.from_conn_string(path)
        saver = await manager.__aenter__()
        await saver.aget_tuple(thread)

        async def close() -> None:
            await manager.__aexit__(None, None, None)

        return close

    add("cold_start", await _reopen(timer, open_and_read), note="connect + aget_tuple(latest)")
    return results


# -- om-memory ----------------------------------------------------------------------------


async def run_om_memory(
    dataset: Dataset, sample: AppendSample, workdir: str, timer: Timer
) -> list[Result]:
    """``om-memory`` on its SQLite storage, with observation and reflection switched off.

    Its provider is a stub that raises if called; its token counter gets the same offline
    cl100k encoding as ours (its default would download o200k tables).
    """
    import om_memory.token_counter as token_counter  # type: ignore[import-untyped]
    from om_memory import (
        LLMProvider,
        Message,
        Observation,
        ObservationalMemory,
        OMConfig,
    )
    from om_memory.models import Priority  # type: ignore[import-untyped]
    from om_memory.storage.sqlite import SQLiteStorage  # type: ignore[import-untyped]

    class NoCallProvider(LLMProvider):  # type: ignore[misc]
        async def acomplete(self, system_prompt: str, user_prompt: str) -> str:
            raise RuntimeError("the benchmark calls no model")

        def complete(self, system_prompt: str, user_prompt: str) -> str:
            raise RuntimeError("the benchmark calls no model")

        @property
        def model_name(self) -> str:
            return "bench-no-model"

    name, size = "om-memory", dataset.size
    path = os.path.join(workdir, f"om-memory-{size}.db")
    config = OMConfig(
        observer_token_threshold=10**12,
        reflector_token_threshold=10**12,
        max_message_history_tokens=10**12,
        message_token_budget=10**12,
        auto_observe=False,
        auto_reflect=False,
        track_costs=False,
    )
    saved = token_counter.HAS_TIKTOKEN
    token_counter.HAS_TIKTOKEN = False
    try:
        om = ObservationalMemory(
            provider=NoCallProvider(), storage=SQLiteStorage(db_path=path), config=config
        )
    finally:
        token_counter.HAS_TIKTOKEN = saved
    om.token_counter.custom_tokenizer = get_estimator().count
    results: list[Result] = []

    def add(workload: str, samples: list[float], note: str = "") -> None:
        results.append(Result(workload, name, size, samples, note=note))

    def message(entry: SessionEntry) -> Any:
        text = _text(entry)
        return Message(
            id=entry.id,
            thread_id=SESSION_ID,
            role=entry.role or "user",
            content=text,
            timestamp=datetime.fromisoformat(entry.timestamp),
            token_count=om.token_counter.count(f"{entry.role}: {text}"),
        )

    priorities = {"low": Priority.INFO, "medium": Priority.IMPORTANT, "high": Priority.CRITICAL}
    stamps = {e.id: e.timestamp for e in dataset.entries}
    observations = []
    for index, memory_id, text, source in dataset.observed:
        record = dataset.entries[index]
        priority = record.data["observations"][0]["priority"] if record.data else "low"
        observations.append(
            Observation(
                id=memory_id,
                thread_id=SESSION_ID,
                observation_date=datetime.fromisoformat(stamps[source]),
                priority=priorities[priority],
                content=text,
                source_message_ids=[source],
            )
        )

    await om.ainitialize()
    messages = dataset.messages
    for i in range(0, len(messages), 2000):
        await om.storage.asave_messages([message(e) for e in messages[i : i + 2000]])
    await om.storage.asave_observations(observations)

    add(
        "context",
        await timer.measure(lambda: om.aget_context(SESSION_ID)),
        note="aget_context(thread): reads every message",
    )

    async def add_message(entry: SessionEntry) -> None:
        await om.aadd_message(SESSION_ID, entry.role or "user", _text(entry))

    samples, made = await time_calls(
        _calls(add_message, sample.singles), timer.repeat, budget_s=SLOW_APPEND_BUDGET_S
    )
    add("append_single", samples, note=f"aadd_message x {made:,} (reads the thread each call)")
    await om.aclose()
    return results


PEER_RUNNERS: dict[str, PeerRunner] = {
    "SQLiteSession": run_sqlite_session,
    "AsyncSqliteSaver": run_async_sqlite_saver,
    "om-memory": run_om_memory,
}
