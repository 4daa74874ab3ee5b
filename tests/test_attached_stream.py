"""An attached ``stream()`` that the consumer abandons still ends its run when closed."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from prism_om.attach import create_observational_memory
from prism_om.host import Agent
from prism_om.providers import ScriptedProvider, TextEvent
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.workers import OfflineMemoryProvider

FACT = "Dana owns the billing migration and it ships on 2026-12-04."


def attached_agent(session_id: str) -> tuple[Any, Session]:
    session = Session(MemoryStore(), session_id)
    words = [TextEvent(w) for w in ("Noted, ", "Dana ", "owns ", "it.")]
    agent = Agent(session, ScriptedProvider([words] * 10))
    offline = OfflineMemoryProvider()
    memory = create_observational_memory(
        {"observation": {"provider": offline, "model": "offline", "message_tokens": 1}}
    )
    return memory.attach(agent), session


async def test_closing_a_stream_after_breaking_out_ends_the_run() -> None:
    attached, session = attached_agent("early")
    stream = attached.agent.stream(FACT)
    async for event in stream:
        assert isinstance(event, TextEvent)
        break  # the consumer has what it wanted
    await stream.aclose()
    # The turn's post-run work ran: the user's message was observed.
    ledger = await session.store.ledger("early")
    assert ledger.observations, "post-run work ran for the abandoned turn"
    # And the run is no longer in flight: a manual flush is not refused.
    result = await attached.flush()
    assert result.reason != "run_active"


async def test_aclosing_a_stream_ends_the_run_and_the_next_turn_streams() -> None:
    attached, session = attached_agent("closing")
    async with contextlib.aclosing(attached.agent.stream(FACT)) as stream:
        async for _event in stream:
            break
    assert (await session.store.ledger("closing")).observations
    assert (await attached.flush()).reason != "run_active"
    # The provider's stream was closed too: the next turn streams to its end.
    events = [e async for e in attached.agent.stream("What ships on 2026-12-04?")]
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == "Noted, Dana owns it."


async def test_a_stream_read_to_its_end_still_runs_the_pipeline_once() -> None:
    attached, session = attached_agent("whole")
    calls: list[int] = []
    after = attached._after_run

    async def counted(**options: Any) -> None:
        calls.append(1)
        await after(**options)

    attached._after_run = counted
    events = [e async for e in attached.agent.stream(FACT)]
    assert sum(isinstance(e, TextEvent) for e in events) == 4 and calls == [1]
    assert (await session.store.ledger("whole")).observations


async def test_a_stream_dropped_without_closing_ends_its_run_when_finalised() -> None:
    # No aclose(): the event loop's async-generator finaliser closes the dropped stream,
    # and that close runs the same path.
    attached, session = attached_agent("dropped")
    async for _event in attached.agent.stream(FACT):
        break
    for _ in range(500):
        if not attached._runs_active and (await session.store.ledger("dropped")).observations:
            break
        await asyncio.sleep(0)
    assert attached._runs_active == 0
    assert (await session.store.ledger("dropped")).observations
