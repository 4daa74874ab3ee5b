"""Coverage is earned by the offline observer (issue 31): hundreds of similar messages,
each carrying one distinct fact, observed at the default settings through an attached
agent; afterwards every fact is in the memory or in the next request's window.

On the code before, the offline observer took a message whose content words overlapped an
earlier one's by 80% for a repeat and added it as a source of that observation, fact and
all: the run's coverage then moved past it, so its fact was in neither the memory nor
(once newer messages pushed it out of the recent window) the request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from prism_om.attach import create_observational_memory
from prism_om.core.request_window import request_message_window
from prism_om.host import Agent
from prism_om.observational_memory.settings import DEFAULT_RECENT_MESSAGES
from prism_om.providers.base import DoneEvent, ProviderEvent, ProviderRequest, TextEvent
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.workers import (
    OFFLINE_MODEL,
    OfflineMemoryProvider,
    create_observational_memory_runtime,
)

TURNS = 360
_WORDS = "amber fox owl reed slate moss pine dune kelp lark mint opal rust sage teal wren".split()
_MESSAGE = (
    "Quick update from facilities about the storage lockers on the third floor of the main "
    "building next to the kitchen and the printer room: locker {n} now opens with the code "
    "word {word}, and the old badge readers stay switched off until the new ones arrive."
)


def fact(n: int) -> tuple[str, str]:
    return str(100 + n), f"{_WORDS[n % 16]}-{_WORDS[(n * 7 + 3) % 16]}"


class Noted:
    """A stand-in model: the same short reply to every turn."""

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        yield TextEvent("Noted, thanks.")
        yield DoneEvent("stop")


def holds(text: str, n: int) -> bool:
    locker, word = fact(n)
    return any(f"locker {locker} " in line and word in line for line in text.splitlines())


async def test_every_fact_of_similar_messages_is_in_memory_or_the_request() -> None:
    store = MemoryStore()
    session = Session(store, "lockers")
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    # Default thresholds: the observer runs once 10,000 tokens of messages wait.
    memory = create_observational_memory(observation=workers, reflection=workers)
    attached = memory.attach(Agent(session=session, provider=Noted()))
    for n in range(TURNS):
        locker, word = fact(n)
        await attached.agent.run(_MESSAGE.format(n=locker, word=word))
    ledger = await store.ledger("lockers")
    assert ledger.observation_covers_up_to_id is not None  # the observer did run
    remembered = "\n".join(r.observation.text for r in ledger.observations)
    recent = DEFAULT_RECENT_MESSAGES
    window = request_message_window(await store.snapshot("lockers", recent=recent), recent)
    raw = "\n".join(e.message.text() for e in window.selected if e.message is not None)
    lost = [n for n in range(TURNS) if not holds(remembered, n) and not holds(raw, n)]
    assert lost == []
    covered = [n for n in range(TURNS) if not holds(raw, n)]
    assert len(covered) > TURNS // 2  # most facts rest on memory alone
    # Each fact is its own observation's, citing its own message.
    request = await attached.agent.request_preview(None)
    text = "\n".join([request.system, *(m.content for m in request.messages)])
    assert [n for n in range(TURNS) if not holds(text, n)] == []


async def test_a_run_its_cap_stops_covers_only_the_messages_it_recorded() -> None:
    # One provider turn of one call (40 observations) per run: each run stops before the
    # end of its chunk, its coverage ends at the newest message it recorded, and the flush
    # goes on with the rest in further runs.
    store = MemoryStore()
    session = Session(store, "capped")
    for n in range(TURNS // 3):
        locker, word = fact(n)
        await session.append_message("user", _MESSAGE.format(n=locker, word=word))
        await session.append_message("assistant", "Noted, thanks.")
    runtime = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": OfflineMemoryProvider(calls_per_turn=1)},
        session_model=OFFLINE_MODEL,
        max_worker_turns=1,
    )
    await runtime.flush(force_observer=True)
    ledger = await store.ledger("capped")
    remembered = "\n".join(r.observation.text for r in ledger.observations)
    snapshot = await store.snapshot("capped", recent=DEFAULT_RECENT_MESSAGES)
    raw = "\n".join(e.message.text() for e in snapshot.uncovered_messages if e.message)
    assert [n for n in range(TURNS // 3) if not holds(remembered, n) and not holds(raw, n)] == []
    records = [
        e for e in await store.entries("capped") if e.custom_type == "om.observations.recorded"
    ]
    assert len(records) > 1  # the cap did stop runs
