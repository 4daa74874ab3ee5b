"""The first promise: every message is in the memory, in the next request, or in both.

A long session whose every user message carries one unique fact (a code word) runs
through the attached ``Agent`` and through ``PrismSession``, with the shipped offline
workers, on every adapter. After every turn, the next request (``request_preview`` /
``get_items``) must hold every fact seen so far: in the rendered memory or raw in the
window. On the code before the request window rule (the last 8 messages only), ~110 of
160 turns missed up to 7 facts each: those the observer had not covered yet.

The pool is large enough that the dropper never retires an observation (forgetting on
purpose, within a budget, is a different matter than losing sight of a message).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from prism_om.attach import create_observational_memory
from prism_om.host import Agent
from prism_om.observational_memory import create_work_scope_controller
from prism_om.providers.base import DoneEvent, ProviderEvent, ProviderRequest, TextEvent
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.testing.dialog import DialogTurn, dialog_turns
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider

TURNS = 64
MESSAGE_TOKENS = 900  # the observer runs every ~4 turns: many covered and uncovered spans


class Replies:
    """A stand-in model that answers each turn with the dialog's scripted reply."""

    def __init__(self, turns: Sequence[DialogTurn]) -> None:
        self._replies = iter(t.assistant for t in turns)

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        yield TextEvent(next(self._replies))
        yield DoneEvent("stop")


def missing(text: str, seen: Sequence[DialogTurn]) -> list[str]:
    return [t.fact for t in seen if t.fact not in text]


def request_text(request: ProviderRequest) -> str:
    return "\n".join([request.system, *(m.content for m in request.messages)])


@pytest.mark.parametrize(
    "variant", ["plain", "token-trim", "scopes", "compactions", "passive-compactions"]
)
async def test_the_agent_never_loses_sight_of_a_fact(store: SessionStore, variant: str) -> None:
    turns = list(dialog_turns(TURNS, seed=3))
    context: dict[str, Any] = {}
    if variant == "token-trim":
        context["recent_message_max_tokens"] = 60
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    om = create_observational_memory(
        observation={**workers, "message_tokens": MESSAGE_TOKENS},
        reflection={**workers, "observation_tokens": 3 * MESSAGE_TOKENS},
        dropper={"policy": "lowest-relevance"},
        context={"recent_messages": 4, "observations_pool_max_tokens": 60_000, **context},
        passive=variant == "passive-compactions",
        trigger={"type": "never"},
    )
    session = Session(store, f"facts-{variant}")
    attached = om.attach(Agent(session=session, provider=Replies(turns)))
    if variant == "scopes":
        scopes = create_work_scope_controller(session=session, append_entry=session.append)
        await scopes.open("task:lockers", kind="task", label="Locker codes")
        await scopes.enter("task:lockers")
    for index, turn in enumerate(turns):
        await attached.agent.run(turn.user)
        if variant.endswith("compactions") and index % 20 == 19:
            await attached.agent.compact()
        request = await attached.agent.request_preview(None)
        assert missing(request_text(request), turns[: index + 1]) == [], f"after turn {index}"
    # The session really exercised memory: most facts are covered by observations now.
    ledger = await store.ledger(session.id)
    assert ledger.observation_covers_up_to_id is not None
    assert len(ledger.observations) > TURNS // 2


def _item_text(items: Sequence[Any]) -> str:
    out: list[str] = []
    for item in items:
        content = item.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(str(part.get("text", "")) for part in content)
    return "\n".join(out)


@pytest.mark.parametrize("trim", [None, 60], ids=["plain", "token-trim"])
async def test_prism_session_never_loses_sight_of_a_fact(
    store: SessionStore, trim: int | None
) -> None:
    pytest.importorskip("agents")
    from prism_om.integrations.openai_agents import PrismSession

    turns = list(dialog_turns(TURNS, seed=5))
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    om = create_observational_memory(
        observation={**workers, "message_tokens": MESSAGE_TOKENS},
        reflection={**workers, "observation_tokens": 3 * MESSAGE_TOKENS},
        dropper={"policy": "lowest-relevance"},
        context={
            "recent_messages": 4,
            "recent_message_max_tokens": trim,
            "observations_pool_max_tokens": 60_000,
        },
    )
    session = PrismSession("facts-sdk", store, memory=om)
    for index, turn in enumerate(turns):
        await session.get_items()
        await session.add_items([{"role": "user", "content": turn.user}])
        reply = {
            "id": f"msg_{index}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": turn.assistant, "annotations": []}],
        }
        await session.add_items([reply])
        text = _item_text(await session.get_items())
        assert missing(text, turns[: index + 1]) == [], f"after turn {index}"
    assert (await store.ledger("facts-sdk")).observation_covers_up_to_id is not None
