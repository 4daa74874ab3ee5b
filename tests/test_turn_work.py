"""What one ordinary turn costs, counted: store reads, worker reads, tokenisations.

An *ordinary* turn is one in which no memory worker runs (most turns: the observer runs
once the uncovered messages reach ``observation.message_tokens``). Such a turn must make at
most 4 public store reads (it makes one: the leaf check that tells the branch's snapshot
is still current), its post-run flush must make none, and it must encode no line of a
memory block that did not change. On the code before the branch snapshot, an ordinary turn
of the attached agent made 17 reads (the live ledger 6 times, the memory head 4, the scope
map 4, the recent messages 2, the entries after the coverage once) and re-encoded the
whole rendered memory twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from prism_om.attach import create_observational_memory
from prism_om.core.context_blocks import MEMORY_BLOCK_NAME
from prism_om.host import Agent
from prism_om.providers.base import DoneEvent, ProviderEvent, ProviderRequest, TextEvent
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.testing.counting import CountingStore
from prism_om.testing.dialog import DialogTurn, dialog_turns
from prism_om.tokens import LineMemo, TokenEstimator, get_estimator
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider

MESSAGE_TOKENS = 1200


class Replies:
    def __init__(self, turns: Sequence[DialogTurn]) -> None:
        self._replies = iter(t.assistant for t in turns)

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        yield TextEvent(next(self._replies))
        yield DoneEvent("stop")


class EncodeLog:
    """An estimator of the default encoding that records every text it encodes."""

    def __init__(self) -> None:
        base = get_estimator()
        self.texts: list[str] = []

        def encode(text: str) -> Any:
            self.texts.append(text)
            return base._encode(text)

        self.estimator = TokenEstimator(base.name, encode, LineMemo())


def offline_memory() -> Any:
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    return create_observational_memory(
        observation={**workers, "message_tokens": MESSAGE_TOKENS},
        reflection={**workers, "observation_tokens": 4 * MESSAGE_TOKENS},
        dropper={"policy": "lowest-relevance"},
        context={"recent_messages": 4},
    )


async def test_an_ordinary_turn_reads_once_and_encodes_no_unchanged_memory(
    store: SessionStore,
) -> None:
    turns = list(dialog_turns(60, seed=11))
    counting = CountingStore(store)
    log = EncodeLog()
    agent = Agent(session=Session(counting, "work"), provider=Replies(turns))  # type: ignore[arg-type]
    attached = offline_memory().attach(agent, estimator=log.estimator)
    flush = attached.runtime.flush
    flush_reads: list[int] = []

    async def counted_flush(**options: Any) -> Any:
        with counting.counting() as calls:
            result = await flush(**options)
        flush_reads.append(calls.reads)
        return result

    attached.runtime.flush = counted_flush  # type: ignore[method-assign]
    ordinary = 0
    for index, turn in enumerate(turns):
        memory_before = attached.context_provider.last_blocks
        log.texts.clear()
        flush_reads.clear()
        with counting.counting() as calls:
            await attached.agent.run(turn.user)
        worked = bool(attached.last_flush and attached.last_flush.entry_ids)
        if index < 10 or worked or memory_before is None:
            continue  # warming up, or a worker ran: not an ordinary turn
        ordinary += 1
        assert calls.reads <= 4, (index, calls.read_names())
        assert calls.reads == 1, (index, calls.read_names())  # the leaf check alone
        assert flush_reads == [0], index  # nothing due: the flush read nothing
        block = next((b for b in memory_before.blocks if b.name == MEMORY_BLOCK_NAME), None)
        now = attached.context_provider.last_blocks
        assert now is not None
        same = next((b for b in now.blocks if b.name == MEMORY_BLOCK_NAME), None)
        if block is not None and same is not None and same.text == block.text:
            lines = set(block.text.splitlines(keepends=True))
            encoded = {text for text in log.texts if text in lines}
            assert encoded == set(), (index, sorted(encoded)[:3])
    assert ordinary >= 30


async def test_prism_session_turns_read_little(store: SessionStore) -> None:
    pytest.importorskip("agents")
    from prism_om.integrations.openai_agents import PrismSession

    turns = list(dialog_turns(40, seed=13))
    counting = CountingStore(store)
    session = PrismSession("work-sdk", counting, memory=offline_memory())  # type: ignore[arg-type]
    ordinary = 0
    for index, turn in enumerate(turns):
        with counting.counting() as calls:
            await session.get_items()
            await session.add_items([{"role": "user", "content": turn.user}])
            worked = bool(session.last_flush and session.last_flush.entry_ids)
            await session.add_items([{"role": "assistant", "content": turn.assistant}])
            worked = worked or bool(session.last_flush and session.last_flush.entry_ids)
        if index < 5 or worked:
            continue
        ordinary += 1
        assert calls.reads <= 4, (index, calls.read_names())
    assert ordinary >= 20
