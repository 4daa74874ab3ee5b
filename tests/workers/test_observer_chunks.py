"""A bulk import reaches a model's observer in chunks, each its own request and its own
coverage record, so a failing request loses one chunk, not the session (issue 18 item 4)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.chat_server import ChatServer, Raw, Reply

from prism_om.core.limits import DEFAULT_MAX_WORKER_MESSAGE_BYTES
from prism_om.core.records import OBSERVATIONS_RECORDED
from prism_om.entries import SessionEntry, entry_from_wire
from prism_om.importers import import_conversation
from prism_om.observational_memory.settings import DEFAULT_MESSAGE_TOKENS
from prism_om.providers import ScriptedProvider
from prism_om.providers.openai_compat import OpenAICompatibleProvider
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.tokens import get_estimator
from prism_om.workers import create_observational_memory_runtime, run_observer
from prism_om.workers.transcript import select_observer_batch

ENTRY_HEADER = re.compile(r"^\[entry (\S+) \|", re.MULTILINE)
CAP = 48 * 1024  # a small max_worker_message_bytes: a prompt's sources get a third of it


class ObserverServer(ChatServer):
    """Answers each observer run from its own prompt: one observation citing every entry
    shown, then a turn without calls. ``fail_runs`` (1-based run numbers) answer HTTP 500."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_runs: set[int] = set()
        self.runs = 0
        self.shown: list[list[str]] = []
        """The entry ids of each run's prompt, failed runs included."""
        self.failed: list[int] = []

    def next_reply(self) -> Reply | Raw | None:
        body = self.requests[-1].body
        messages = body["messages"]
        if messages[-1]["role"] != "user":
            return Reply(text="recorded")  # the run's second turn: nothing more to call
        self.runs += 1
        ids = ENTRY_HEADER.findall(messages[-1]["content"])
        self.shown.append(ids)
        if self.runs in self.fail_runs:
            self.failed.append(self.runs)
            return Raw(500, b'{"error": {"message": "the model is overloaded"}}')
        arguments = {
            "observations": [
                {"text": f"chunk {self.runs}: {len(ids)} messages", "sourceEntryIds": ids}
            ]
        }
        return Reply(
            tool_calls=[(f"call_{self.runs}", "record_observations", json.dumps(arguments))]
        )


@contextmanager
def observer_server() -> Iterator[ObserverServer]:
    server = ObserverServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[ObserverServer]:
    with observer_server() as chat:
        yield chat


@pytest.fixture
async def provider(server: ObserverServer) -> AsyncIterator[OpenAICompatibleProvider]:
    async with OpenAICompatibleProvider(server.url, "observer-model") as made:
        yield made


def conversation(count: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Message {i}: Melanie booked {i % 7 + 2} seats for the concert on "
            f"{i % 28 + 1} July and paid {10 * i} dollars by card. Caroline will drive, "
            f"leaving at {i % 12 + 1} pm from the station on Elm Street; Jon brings "
            f"{i % 5 + 1} umbrellas because the forecast says rain after {i % 9 + 3} pm.",
        }
        for i in range(count)
    ]


async def imported(store: SessionStore, tmp_path: Path, count: int = 300) -> Session:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(conversation(count)), encoding="utf-8")
    result = await import_conversation(store, path, session_id="chat")
    assert result.entry_count == count
    return Session(store, "chat")


def runtime(
    session: Session, provider: OpenAICompatibleProvider, cap: int | None = None, **observation: Any
) -> Any:
    return create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": provider, "model": "observer-model", **observation},
        max_worker_message_bytes=cap,
    )


async def recorded_chunks(session: Session) -> list[tuple[str, list[str]]]:
    """Each observer record on the branch: its coverage and the ids its observations cite."""
    chunks = []
    for entry in await session.store.list(session.id):
        if entry.custom_type == OBSERVATIONS_RECORDED and entry.data is not None:
            cited = [s for o in entry.data["observations"] for s in o["sourceEntryIds"]]
            chunks.append((entry.data["coversUpToId"], cited))
    return chunks


async def message_ids(session: Session) -> list[str]:
    return [e.id for e in await session.store.list(session.id) if e.kind == "message"]


async def test_a_bulk_import_is_observed_in_chunks_of_message_tokens(
    store: SessionStore, tmp_path: Path, server: ObserverServer, provider: OpenAICompatibleProvider
) -> None:
    # About 85 KB and 19,000 message tokens: one request before chunking (issue 18).
    session = await imported(store, tmp_path)
    result = await runtime(session, provider).flush(force=True)
    assert result.status == "completed", result.error
    outcome = result.outcome("observer")
    assert outcome is not None and outcome.runs == len(server.shown) >= 2
    est = get_estimator()
    by_id = {e.id: e for e in await store.list("chat")}
    settings = DEFAULT_MESSAGE_TOKENS
    assert all(sum(est.count_entry(by_id[i]) for i in ids) <= settings for ids in server.shown)
    sizes = [int(r.headers["content-length"]) for r in server.requests]
    assert len(sizes) == 2 * outcome.runs and max(sizes) < DEFAULT_MAX_WORKER_MESSAGE_BYTES
    # Each chunk its own record, covering up to its own last message, in order.
    chunks = await recorded_chunks(session)
    assert [cited for _, cited in chunks] == server.shown
    assert [cover for cover, _ in chunks] == [ids[-1] for ids in server.shown]
    # No message shown twice, none skipped.
    assert [i for ids in server.shown for i in ids] == await message_ids(session)


async def test_chunks_stay_under_a_small_byte_cap(
    store: SessionStore, tmp_path: Path, server: ObserverServer, provider: OpenAICompatibleProvider
) -> None:
    session = await imported(store, tmp_path)
    flush = runtime(session, provider, cap=CAP, message_tokens=10**9).flush(force=True)
    result = await flush
    assert result.status == "completed", result.error
    sizes = [int(r.headers["content-length"]) for r in server.requests]
    assert len(server.shown) >= 4 and max(sizes) < CAP
    assert [i for ids in server.shown for i in ids] == await message_ids(session)


async def test_a_failing_chunk_keeps_the_earlier_ones_and_the_next_flush_resumes_there(
    store: SessionStore, tmp_path: Path, server: ObserverServer, provider: OpenAICompatibleProvider
) -> None:
    session = await imported(store, tmp_path)
    server.fail_runs = {3}
    first = await runtime(session, provider, message_tokens=4000).flush(force=True)
    assert first.status == "failed" and "overloaded" in (first.error or "")
    outcome = first.outcome("observer")
    assert outcome is not None and (outcome.status, outcome.reason) == ("failed", "provider_error")
    assert outcome.runs == 2 and len(outcome.entry_ids) == 2
    chunks = await recorded_chunks(session)
    assert [cited for _, cited in chunks] == server.shown[:2]
    live = await store.live_ledger("chat")
    assert live.observation_covers_up_to_id == server.shown[1][-1]
    failed_chunk = server.shown[2]

    second = await runtime(session, provider, message_tokens=4000).flush(force=True)
    assert second.status == "completed", second.error
    # The retry starts with exactly the chunk that failed.
    assert server.shown[3] == failed_chunk
    chunks = await recorded_chunks(session)
    cited = [i for _, ids in chunks for i in ids]
    assert cited == await message_ids(session)  # each message observed once, none skipped
    # Coverage ends past every message (on the first flush's own records after them).
    live = await store.live_ledger("chat")
    after = await store.entries_after("chat", live.observation_covers_up_to_id)
    assert not [e for e in after if e.kind == "message"]


async def test_chunks_are_bounded_by_observation_message_tokens(
    store: SessionStore, tmp_path: Path, server: ObserverServer, provider: OpenAICompatibleProvider
) -> None:
    session = await imported(store, tmp_path, count=120)
    limit = 600
    result = await runtime(session, provider, message_tokens=limit).flush(force=True)
    assert result.status == "completed", result.error
    est = get_estimator()
    by_id = {e.id: e for e in await store.list("chat")}
    chunk_tokens = [sum(est.count_entry(by_id[i]) for i in ids) for ids in server.shown]
    assert len(chunk_tokens) >= 4 and max(chunk_tokens) <= limit
    # Each chunk is full: the next message would have passed the limit.
    follow = [by_id[ids[0]] for ids in server.shown[1:]]
    assert all(
        tokens + est.count_entry(entry) > limit
        for tokens, entry in zip(chunk_tokens, follow, strict=False)
    )
    assert [i for ids in server.shown for i in ids] == await message_ids(session)


def test_a_message_above_the_token_bound_is_its_own_chunk() -> None:
    def message(index: int, text: str) -> SessionEntry:
        return entry_from_wire(
            {
                "id": f"e{index:04d}",
                "sessionId": "s",
                "parentId": None if index == 0 else f"e{index - 1:04d}",
                "kind": "message",
                "timestamp": "2024-05-01T09:00:00.000Z",
                "message": {"role": "user", "content": text},
            }
        )

    entries = [message(0, "word " * 400), message(1, "short"), message(2, "short")]
    batch = select_observer_batch(entries, 1_000_000, max_tokens=50)
    assert [e.id for e in batch.sources] == ["e0000"] and not batch.truncated
    rest = select_observer_batch(entries[1:], 1_000_000, max_tokens=50)
    assert [e.id for e in rest.sources] == ["e0001", "e0002"]


async def test_run_observer_takes_the_token_bound_too() -> None:
    entries = [
        entry_from_wire(
            {
                "id": f"e{i:04d}",
                "sessionId": "s",
                "parentId": None if i == 0 else f"e{i - 1:04d}",
                "kind": "message",
                "timestamp": "2024-05-01T09:00:00.000Z",
                "message": {"role": "user", "content": "ten words " * 5},
            }
        )
        for i in range(6)
    ]
    provider = ScriptedProvider(then="stop")
    whole = await run_observer(provider=provider, entries=entries, max_turns=1)
    assert (len(whole.source_ids), whole.remaining) == (6, 0)
    per = get_estimator().count_entry(entries[0])
    chunk = await run_observer(
        provider=provider, entries=entries, max_turns=1, message_tokens=2 * per
    )
    assert chunk.source_ids == ("e0000", "e0001") and chunk.remaining == 4
    assert chunk.covers_up_to_id == "e0001"
