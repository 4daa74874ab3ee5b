"""When what memory has not covered does not fit the model's input, nothing goes silently.

The request window holds every uncovered message. When those alone exceed what the
model's input leaves (its input cap less the system text and the memory block), the
inline runtime observes first, so memory covers them before the request is built; a
background runtime sends the newest that fit and says so (``WINDOW_OVER_BUDGET``, with the
ids left out and the cursor to recall them by).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from prism_om.attach import create_observational_memory
from prism_om.debug import WINDOW_OVER_BUDGET
from prism_om.host import Agent
from prism_om.providers.base import DoneEvent, ProviderEvent, ProviderRequest, TextEvent
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.testing.dialog import dialog_turns
from prism_om.workers import OFFLINE_MODEL, Model, OfflineMemoryProvider

# Room for the memory of the backlog, not for the backlog itself (~12,000 tokens).
SMALL = Model(id="small", provider="stand-in", context_window=8000, max_output_tokens=500)


class Noted:
    def __init__(self) -> None:
        self.requests: list[ProviderRequest] = []

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        yield TextEvent("Noted.")
        yield DoneEvent("stop")


async def _imported(store: SessionStore, sid: str, turns: int) -> list[Any]:
    """A backlog memory never covered: ``turns`` dialog turns appended without a turn."""
    session = Session(store, sid)
    dialog = list(dialog_turns(turns, seed=21))
    for turn in dialog:
        await session.append_message("user", turn.user)
        await session.append_message("assistant", turn.assistant)
    return dialog


def _memory(background: bool, events: list[tuple[str, dict[str, Any]]]) -> Any:
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    return create_observational_memory(
        # A threshold far above the backlog: only the budget can start the observer.
        observation={**workers, "message_tokens": 100_000},
        reflection={**workers, "observation_tokens": 100_000},
        dropper={"policy": "lowest-relevance"},
        background=background,
        debug=lambda event, data: events.append((event, data)),
    )


async def test_the_inline_runtime_observes_first(store: SessionStore) -> None:
    dialog = await _imported(store, "inline", 60)
    events: list[tuple[str, dict[str, Any]]] = []
    model = Noted()
    attached = _memory(False, events).attach(
        Agent(Session(store, "inline"), model), session_model=SMALL
    )
    await attached.agent.run("What is in locker 105?")
    sent = model.requests[0]
    # The observer ran before the request was built: the backlog is memory now.
    ledger = await store.ledger("inline")
    assert ledger.observation_covers_up_to_id is not None
    text = "\n".join([sent.system, *(m.content for m in sent.messages)])
    assert [t.fact for t in dialog if t.fact not in text] == []
    assert not [e for e, _ in events if e == WINDOW_OVER_BUDGET]


async def test_the_background_runtime_sends_what_fits_and_warns(store: SessionStore) -> None:
    dialog = await _imported(store, "bg", 60)
    events: list[tuple[str, dict[str, Any]]] = []
    model = Noted()
    attached = _memory(True, events).attach(Agent(Session(store, "bg"), model), session_model=SMALL)
    await attached.agent.run("What is in locker 105?")
    await attached.drain()
    sent = model.requests[0]
    warned = [data for event, data in events if event == WINDOW_OVER_BUDGET]
    assert len(warned) == 1
    omitted = warned[0]["omittedEntryIds"]
    assert omitted  # the oldest uncovered messages did not fit
    # The newest fit and are sent; the note names the cursor to recall the rest.
    assert dialog[-1].fact in sent.system
    assert "recall them with cursor" in sent.system
    assert warned[0]["recallCursor"] in sent.system
    # Exactly the omitted ones are missing, and the warning named each of them.
    entries = {e.id: e for e in await store.entries("bg")}
    missing = {t.fact for t in dialog if t.fact not in sent.system}
    named = {
        t.fact
        for t in dialog
        for i in omitted
        if entries[i].message is not None and t.fact in entries[i].message.text()
    }
    assert missing == named
