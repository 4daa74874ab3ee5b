"""The deterministic workers are deterministic (issue 31): the same conversation gives the
same memory, the same drops and the same render, ids aside, whatever ids are minted.

Memory ids are random, and a tokenizer counts ``000000000001`` in fewer tokens than
``fedcbafedcba``. On the code before, the rendered memory that the dropper holds to its
target was measured with the ids as written, so three runs of one input dropped 863, 864
and 865 observations.
"""

from __future__ import annotations

import itertools
import re
from types import SimpleNamespace

import pytest

import prism_om.ids
from prism_om.core.memory_budget import drop_to_rendered_target, rendered_memory_tokens
from prism_om.core.records import Observation
from prism_om.core.render import render_observational_memory
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.testing.dialog import dialog_turns
from prism_om.workers import (
    OFFLINE_MODEL,
    OfflineMemoryProvider,
    create_observational_memory_runtime,
)

_IDS = re.compile(r"\[[0-9a-f]{12}\]")


def digits(n: int) -> str:
    return f"{n:012d}"


def letters(n: int) -> str:
    return "".join("abcdef"[(n * 7 + k * 5) % 6] for k in range(10)) + f"{n % 256:02x}"


def observations(mint: object) -> list[Observation]:
    assert callable(mint)
    return [
        Observation(
            id=mint(n),
            text=f"User: locker {100 + n} opens with code word cedar-{n}.",
            source_entry_ids=[f"e{n}"],
            observed_at=f"2026-03-02T09:{n % 60:02d}:00.000Z",
            priority="high" if n % 3 else "medium",
        )
        for n in range(200)
    ]


def test_ids_do_not_change_the_measure_or_the_drops() -> None:
    a, b = observations(digits), observations(letters)
    assert len({o.id for o in b}) == len(b)
    assert rendered_memory_tokens([], a) == rendered_memory_tokens([], b)
    target = rendered_memory_tokens([], a) // 2
    dropped_a = [o.text for o in a if o.id in set(drop_to_rendered_target([], a, target))]
    dropped_b = [o.text for o in b if o.id in set(drop_to_rendered_target([], b, target))]
    assert dropped_a and dropped_a == dropped_b


async def run(minted: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str], str]:
    counter = itertools.count(1)
    mint = digits if minted == "digits" else letters
    monkeypatch.setattr(
        prism_om.ids, "secrets", SimpleNamespace(token_hex=lambda _n: mint(next(counter)))
    )
    session = Session(MemoryStore(), "same")
    provider = OfflineMemoryProvider()
    runtime = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": provider, "message_tokens": 2000},
        reflection={"provider": provider, "observation_tokens": 4000},
        dropper={"policy": "lowest-relevance"},
        settings={"context": {"observations_pool_max_tokens": 3000}},
        session_model=OFFLINE_MODEL,
    )
    for turn in dialog_turns(120, seed=11):
        await session.append_message("user", turn.user, timestamp=turn.timestamp)
        await session.append_message("assistant", turn.assistant, timestamp=turn.timestamp)
        await runtime.flush()
    ledger = await session.store.ledger("same")
    kept = [r.observation for r in ledger.live_observations()]
    dropped = set(ledger.dropped_observation_ids)
    gone = [r.observation.text for r in ledger.observations if r.id in dropped]
    rendered = render_observational_memory([r.reflection for r in ledger.reflections], kept)
    return [o.text for o in kept], gone, _IDS.sub("[id]", rendered)


async def test_the_same_conversation_gives_the_same_memory_drops_and_render(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = await run("digits", monkeypatch)
    second = await run("letters", monkeypatch)
    assert first[1], "the dropper must have run for this to test anything"
    assert first == second
