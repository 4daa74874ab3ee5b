"""The systems ``python -m bench.turns`` runs side by side, one turn at a time.

Each system does what its user's agent loop does for one turn, and nothing more:

* ``agent:ADAPTER``: prism-om's ``Agent`` with memory attached (``attach()``), offline
  workers at default thresholds, the dropper by lowest relevance: ``agent.run(prompt)``,
  which builds the request, appends the user message, calls the stand-in model, appends
  its reply and runs the post-run memory work (observe / reflect / drop when due, the
  compaction gate), awaited as the default runtime does.
* ``prism-session`` / ``prism-session+memory``: ``PrismSession`` as ``Runner`` drives it:
  ``get_items()``, then ``add_items([user])`` and ``add_items([assistant])``.
* ``sqlite-session`` / ``sqlite-session:20``: the Agents SDK's ``SQLiteSession`` the same
  way, reading the whole history (what ``Runner`` does by default) or the last 20 items.
* ``om-memory``: ``aget_context(thread)``, then ``aadd_message`` of the user message and the
  reply, with its observer and reflector off (it has no offline worker).

A turn returns its own cost with the model's time taken out (``TurnCost``), whether a
memory worker ran in it, and keeps what it sent so the harness can count the prompt's
tokens outside the timed part.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from prism_om.attach import AttachedObservationalMemory, create_observational_memory
from prism_om.entries import SessionEntry, message_entry
from prism_om.host import Agent
from prism_om.host.context import estimate_request_tokens
from prism_om.providers.base import DoneEvent, ProviderEvent, ProviderRequest, TextEvent
from prism_om.session import Session
from prism_om.stores import SessionStore, open_store
from prism_om.testing.dialog import DialogTurn
from prism_om.tokens import get_estimator
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider
from prism_om.workers.runtime import FlushResult

__all__ = ["SYSTEM_NAMES", "System", "TurnCost", "make_system"]

SESSION = "turns"
# Turns appended per bulk write while fast-forwarding; prism-om's memory is flushed after
# each (about one observer run per chunk at the default 10,000 message tokens).
FAST_FORWARD_CHUNK = 50


@dataclass
class TurnCost:
    """One turn's CPU and wall seconds, the stand-in model's share removed."""

    cpu: float
    wall: float
    worker: bool
    """A memory worker ran (or a compaction happened) inside this turn."""
    parts: dict[str, float] | None = None
    """CPU seconds of the turn's parts, where a system has them (``get_items``, ``add_items``)."""


def memory() -> Any:
    """The memory a new user gets: offline workers, default thresholds."""
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    return create_observational_memory(
        observation=dict(workers),
        reflection=dict(workers),
        dropper={"policy": "lowest-relevance"},
    )


def _worker_ran(flush: FlushResult | None) -> bool:
    return flush is not None and any(o.status == "ran" for o in flush.outcomes)


class StandInModel:
    """The model every system shares: answers the scripted reply, timing itself."""

    provider_id = "stand-in"

    def __init__(self) -> None:
        self.reply = ""
        self.cpu = 0.0
        self.wall = 0.0
        self.last_request: ProviderRequest | None = None

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        wall, cpu = time.perf_counter(), time.process_time()
        self.last_request = request
        event = TextEvent(self.reply)
        self.cpu += time.process_time() - cpu
        self.wall += time.perf_counter() - wall
        yield event
        yield DoneEvent("stop")


class System:
    """One system under measurement."""

    name: str
    last_prompt_tokens: int = 0

    async def open(self, workdir: str, pg_url: str | None) -> None: ...

    async def fast_forward(self, turns: Sequence[DialogTurn]) -> None: ...

    async def turn(self, turn: DialogTurn) -> TurnCost: ...

    async def prompt_tokens(self) -> int:
        """Tokens of what the last turn sent the model (counted outside the timing)."""
        return self.last_prompt_tokens

    def store_bytes(self) -> int | None:
        return None

    async def close(self) -> None: ...


def _dir_bytes(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _dirs, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def _files_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))


def _messages(turns: Sequence[DialogTurn]) -> list[SessionEntry]:
    out: list[SessionEntry] = []
    for t in turns:
        out.append(message_entry(SESSION, "user", t.user, timestamp=t.timestamp))
        out.append(message_entry(SESSION, "assistant", t.assistant, timestamp=t.timestamp))
    return out


class AgentSystem(System):
    """prism-om's ``Agent`` with memory attached, on one adapter."""

    def __init__(self, adapter: str) -> None:
        self.name = f"agent:{adapter}"
        self.adapter = adapter
        self.path = ""
        self.store: SessionStore | None = None
        self.model = StandInModel()
        self.attached: AttachedObservationalMemory | None = None

    async def open(self, workdir: str, pg_url: str | None) -> None:
        if self.adapter == "memory":
            url = "memory:"
        elif self.adapter == "jsonl":
            self.path = os.path.join(workdir, "agent-jsonl")
            url = f"jsonl:{self.path}"
        elif self.adapter == "sqlite":
            self.path = os.path.join(workdir, "agent.db")
            url = f"sqlite:{self.path}"
        else:
            assert pg_url is not None, "agent:postgres needs a server"
            url = pg_url
        self.store = await open_store(url)
        agent = Agent(session=Session(self.store, SESSION), provider=self.model)
        self.attached = memory().attach(agent)

    async def fast_forward(self, turns: Sequence[DialogTurn]) -> None:
        assert self.store is not None and self.attached is not None
        for start in range(0, len(turns), FAST_FORWARD_CHUNK):
            chunk = turns[start : start + FAST_FORWARD_CHUNK]
            await self.store.append_at_leaf(_messages(chunk))
            await self.attached.runtime.flush()

    async def turn(self, turn: DialogTurn) -> TurnCost:
        assert self.attached is not None
        self.model.reply, self.model.cpu, self.model.wall = turn.assistant, 0.0, 0.0
        compactions = len(self.attached.compactions)
        wall, cpu = time.perf_counter(), time.process_time()
        await self.attached.agent.run(turn.user)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        worker = _worker_ran(self.attached.last_flush)
        worker = worker or len(self.attached.compactions) != compactions
        return TurnCost(cpu - self.model.cpu, wall - self.model.wall, worker)

    async def prompt_tokens(self) -> int:
        request = self.model.last_request
        return 0 if request is None else estimate_request_tokens(request)

    def store_bytes(self) -> int | None:
        if self.adapter == "sqlite":
            return _files_bytes(self.path)
        if self.adapter == "jsonl":
            return _dir_bytes(self.path)
        return None

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()


def _assistant_item(text: str, n: int) -> dict[str, Any]:
    """The output item ``Runner`` stores for a plain text reply."""
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _items_tokens(items: Sequence[Any]) -> int:
    est = get_estimator()
    total = 0
    for item in items:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            total += est.count(content)
        elif isinstance(content, list):
            total += sum(est.count(str(part.get("text", ""))) for part in content)
    return total


class PrismSessionSystem(System):
    """``PrismSession`` on SQLite, with or without memory, driven as ``Runner`` does."""

    def __init__(self, with_memory: bool) -> None:
        self.name = "prism-session+memory" if with_memory else "prism-session"
        self.with_memory = with_memory
        self.session: Any = None
        self.path = ""
        self.last_items: list[Any] = []

    async def open(self, workdir: str, pg_url: str | None) -> None:
        from prism_om.integrations.openai_agents import PrismSession

        self.path = os.path.join(workdir, f"{self.name}.db")
        self.session = PrismSession(
            SESSION, f"sqlite:{self.path}", memory=memory() if self.with_memory else None
        )
        await self.session.__aenter__()

    async def fast_forward(self, turns: Sequence[DialogTurn]) -> None:
        for start in range(0, len(turns), FAST_FORWARD_CHUNK):
            chunk = turns[start : start + FAST_FORWARD_CHUNK]
            items: list[Any] = []
            for t in chunk:
                items.append({"role": "user", "content": t.user})
                items.append(_assistant_item(t.assistant, t.index))
            await self.session.add_items(items)

    async def turn(self, turn: DialogTurn) -> TurnCost:
        wall, cpu = time.perf_counter(), time.process_time()
        items = await self.session.get_items()
        got = time.process_time()
        await self.session.add_items([{"role": "user", "content": turn.user}])
        ran = _worker_ran(self.session.last_flush)
        await self.session.add_items([_assistant_item(turn.assistant, turn.index)])
        end = time.process_time()
        wall = time.perf_counter() - wall
        self.last_items = items
        ran = (ran or _worker_ran(self.session.last_flush)) if self.with_memory else False
        self.session.last_flush = None
        parts = {"get_items": got - cpu, "add_items": (end - got) / 2}
        return TurnCost(end - cpu, wall, ran, parts)

    async def prompt_tokens(self) -> int:
        return _items_tokens(self.last_items)

    def store_bytes(self) -> int | None:
        return _files_bytes(self.path)

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


class SQLiteSessionSystem(System):
    """The Agents SDK's ``SQLiteSession``: the whole history, or the last ``limit`` items."""

    def __init__(self, limit: int | None) -> None:
        self.name = "sqlite-session" if limit is None else f"sqlite-session:{limit}"
        self.limit = limit
        self.session: Any = None
        self.path = ""
        self.last_items: list[Any] = []

    async def open(self, workdir: str, pg_url: str | None) -> None:
        from agents import SQLiteSession

        self.path = os.path.join(workdir, f"{self.name.replace(':', '-')}.db")
        self.session = SQLiteSession(SESSION, self.path)

    async def fast_forward(self, turns: Sequence[DialogTurn]) -> None:
        for start in range(0, len(turns), FAST_FORWARD_CHUNK):
            items: list[Any] = []
            for t in turns[start : start + FAST_FORWARD_CHUNK]:
                items.append({"role": "user", "content": t.user})
                items.append(_assistant_item(t.assistant, t.index))
            await self.session.add_items(items)

    async def turn(self, turn: DialogTurn) -> TurnCost:
        wall, cpu = time.perf_counter(), time.process_time()
        items = await self.session.get_items(limit=self.limit)
        got = time.process_time()
        await self.session.add_items([{"role": "user", "content": turn.user}])
        await self.session.add_items([_assistant_item(turn.assistant, turn.index)])
        end = time.process_time()
        wall = time.perf_counter() - wall
        self.last_items = items
        parts = {"get_items": got - cpu, "add_items": (end - got) / 2}
        return TurnCost(end - cpu, wall, False, parts)

    async def prompt_tokens(self) -> int:
        return _items_tokens(self.last_items)

    def store_bytes(self) -> int | None:
        return _files_bytes(self.path)

    async def close(self) -> None:
        if self.session is not None:
            self.session.close()


class OmMemorySystem(System):
    """om-memory on its SQLite storage, observer and reflector off (no offline worker)."""

    name = "om-memory"

    def __init__(self) -> None:
        self.om: Any = None
        self.path = ""
        self.last_context = ""

    async def open(self, workdir: str, pg_url: str | None) -> None:
        import om_memory.token_counter as token_counter  # type: ignore[import-untyped]
        from om_memory import LLMProvider, ObservationalMemory, OMConfig
        from om_memory.storage.sqlite import SQLiteStorage  # type: ignore[import-untyped]

        class NoCall(LLMProvider):  # type: ignore[misc]
            async def acomplete(self, system_prompt: str, user_prompt: str) -> str:
                raise RuntimeError("the benchmark calls no model")

            def complete(self, system_prompt: str, user_prompt: str) -> str:
                raise RuntimeError("the benchmark calls no model")

            @property
            def model_name(self) -> str:
                return "bench-no-model"

        self.path = os.path.join(workdir, "om-memory.db")
        config = OMConfig(auto_observe=False, auto_reflect=False, track_costs=False)
        saved = token_counter.HAS_TIKTOKEN
        token_counter.HAS_TIKTOKEN = False  # its default would download o200k tables
        try:
            self.om = ObservationalMemory(
                provider=NoCall(), storage=SQLiteStorage(db_path=self.path), config=config
            )
        finally:
            token_counter.HAS_TIKTOKEN = saved
        self.om.token_counter.custom_tokenizer = get_estimator().count
        await self.om.ainitialize()

    async def fast_forward(self, turns: Sequence[DialogTurn]) -> None:
        # Its add_message reads the whole thread: bulk-save through its storage instead.
        from datetime import datetime

        from om_memory import Message

        rows = []
        for t in turns:
            for role, text in (("user", t.user), ("assistant", t.assistant)):
                rows.append(
                    Message(
                        id=f"{role}-{t.index}",
                        thread_id=SESSION,
                        role=role,
                        content=text,
                        timestamp=datetime.fromisoformat(t.timestamp),
                        token_count=self.om.token_counter.count(f"{role}: {text}"),
                    )
                )
        for start in range(0, len(rows), 2000):
            await self.om.storage.asave_messages(rows[start : start + 2000])

    async def turn(self, turn: DialogTurn) -> TurnCost:
        wall, cpu = time.perf_counter(), time.process_time()
        context = await self.om.aget_context(SESSION)
        await self.om.aadd_message(SESSION, "user", turn.user)
        await self.om.aadd_message(SESSION, "assistant", turn.assistant)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        self.last_context = str(context)
        return TurnCost(cpu, wall, False)

    async def prompt_tokens(self) -> int:
        return get_estimator().count(self.last_context)

    def store_bytes(self) -> int | None:
        return _files_bytes(self.path)

    async def close(self) -> None:
        if self.om is not None:
            await self.om.aclose()


SYSTEM_NAMES = (
    "agent:memory",
    "agent:jsonl",
    "agent:sqlite",
    "agent:postgres",
    "prism-session",
    "prism-session+memory",
    "sqlite-session",
    "sqlite-session:20",
    "om-memory",
)


def make_system(name: str) -> System:
    if name.startswith("agent:"):
        return AgentSystem(name.split(":", 1)[1])
    if name == "prism-session":
        return PrismSessionSystem(False)
    if name == "prism-session+memory":
        return PrismSessionSystem(True)
    if name == "sqlite-session":
        return SQLiteSessionSystem(None)
    if name.startswith("sqlite-session:"):
        return SQLiteSessionSystem(int(name.split(":", 1)[1]))
    if name == "om-memory":
        return OmMemorySystem()
    raise ValueError(f"unknown system {name!r}: one of {', '.join(SYSTEM_NAMES)}")
