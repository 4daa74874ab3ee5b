"""``background=True``: a turn never waits for memory work, and still loses sight of nothing.

The post-run pipeline runs as a task; the next turn starts while it is in flight, reads its
snapshot (the memory as it stands), and sends every message the observer has not covered
yet. ``drain()`` waits for the work scheduled so far.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from prism_om.attach import create_observational_memory
from prism_om.host import Agent
from prism_om.providers.base import DoneEvent, ProviderEvent, ProviderRequest, TextEvent
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.testing.dialog import dialog_turns
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider


class Replies:
    def __init__(self, replies: list[str]) -> None:
        self._replies = iter(replies)
        self.requests: list[ProviderRequest] = []

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        yield TextEvent(next(self._replies))
        yield DoneEvent("stop")


class HeldObserver:
    """The offline observer, held at its first call until ``release`` is set."""

    provider_id = "offline"

    def __init__(self) -> None:
        self.offline = OfflineMemoryProvider()
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.waiting.set()
        await self.release.wait()
        async for event in self.offline.generate(request):
            yield event


def _memory(observer: Any) -> Any:
    offline = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    return create_observational_memory(
        observation={"provider": observer, "model": OFFLINE_MODEL, "message_tokens": 600},
        reflection={**offline, "observation_tokens": 5000},
        dropper={"policy": "lowest-relevance"},
        context={"recent_messages": 2, "observations_pool_max_tokens": 60_000},
        background=True,
    )


async def test_a_turn_never_waits_for_the_memory_work_in_flight(store: SessionStore) -> None:
    turns = list(dialog_turns(12, seed=9))
    observer = HeldObserver()
    model = Replies([t.assistant for t in turns])
    attached = _memory(observer).attach(Agent(session=Session(store, "bg"), provider=model))
    index = 0
    while not observer.waiting.is_set():
        await attached.agent.run(turns[index].user)
        index += 1
        await asyncio.sleep(0)  # let the scheduled post-run work start
    # The observer is held inside the flush task. Further turns complete regardless, and
    # each request still shows every fact so far (nothing is covered yet).
    for turn in turns[index:]:
        await asyncio.wait_for(attached.agent.run(turn.user), timeout=60)
        sent = model.requests[-1]
        text = "\n".join([sent.system, *(m.content for m in sent.messages)])
        seen = turns[: turns.index(turn) + 1]
        assert [t.fact for t in seen if t.fact not in text] == []
    assert attached.runtime.in_flight  # the held flush is still running
    observer.release.set()
    await attached.drain()
    assert not attached.runtime.in_flight
    ledger = await store.ledger("bg")
    assert ledger.observation_covers_up_to_id is not None
    # After the work landed, the next request shows memory plus what it still lacks.
    request = await attached.agent.request_preview(None)
    text = "\n".join([request.system, *(m.content for m in request.messages)])
    assert [t.fact for t in turns if t.fact not in text] == []
