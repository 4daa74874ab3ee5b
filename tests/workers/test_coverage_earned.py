"""An observer run covers only what it handled: a run its turn cap cut short covers up to the
newest message it recorded from, never the rest of its chunk (issue 30, "coverage is
earned"). On the code before, the record's ``coversUpToId`` was the chunk's last entry
whatever the run reached, so the messages after the cut were in neither the memory nor,
once newer messages pushed them out of the window, the request."""

from __future__ import annotations

import re
from typing import Any

from prism_om.providers import ScriptedProvider
from prism_om.providers.base import ProviderRequest
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.workers import create_observational_memory_runtime

ENTRY_HEADER = re.compile(r"^\[entry (\S+) \|", re.MULTILINE)


def first_half(request: ProviderRequest) -> list[Any]:
    """An observer that records from the first half of what it is shown, one message a
    call, and would go on: a call on its last allowed turn."""
    prompt = next(m.content for m in request.messages if m.role == "user")
    ids = ENTRY_HEADER.findall(prompt)
    half = ids[: max(1, len(ids) // 2)]
    return [
        {
            "tool_call": {
                "name": "record_observations",
                "arguments": {"observations": [{"text": f"saw {i}", "sourceEntryIds": [i]}]},
            }
        }
        for i in half
    ]


def nothing(request: ProviderRequest) -> list[Any]:
    return [{"tool_call": {"name": "record_observations", "arguments": {"observations": []}}}]


def runtime(session: Session, provider: ScriptedProvider) -> Any:
    return create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        session_model="scripted",
        observation={"provider": provider},
        max_worker_turns=1,
    )


async def test_a_run_cut_by_its_turn_cap_covers_only_what_it_recorded(store: SessionStore) -> None:
    session = Session(store, "earned")
    messages = [await session.append_message("user", f"fact number {n}") for n in range(6)]
    ids = [m.id for m in messages]
    memory = runtime(session, ScriptedProvider([first_half] * 10))
    result = await memory.flush(force=True)
    assert result.status == "completed"
    records = [
        e for e in await store.entries("earned") if e.custom_type == "om.observations.recorded"
    ]
    # Each run covers up to the newest message it recorded from, so a flush takes several
    # runs (each shown the rest), and no covered message goes without an observation.
    assert len(records) > 1
    for record in records:
        assert record.data is not None
        cited = {s for o in record.data["observations"] for s in o["sourceEntryIds"]}
        assert record.data["coversUpToId"] == max(cited, key=ids.index)
    ledger = await store.ledger("earned")
    cited = {s for r in ledger.observations for s in r.observation.source_entry_ids}
    assert cited == set(ids)
    assert ledger.observation_covers_up_to_id == ids[-1]


async def test_a_cut_run_that_recorded_nothing_covers_nothing(store: SessionStore) -> None:
    session = Session(store, "earned-none")
    for n in range(4):
        await session.append_message("user", f"fact number {n}")
    memory = runtime(session, ScriptedProvider([nothing] * 3))
    result = await memory.flush(force=True)
    outcome = result.outcome("observer")
    assert outcome is not None and outcome.status == "failed" and outcome.reason == "max_turns"
    assert (await store.ledger("earned-none")).observation_covers_up_to_id is None


async def test_a_run_with_a_refused_call_covers_only_what_it_recorded(store: SessionStore) -> None:
    # Issue 31: a run that recorded from its first messages and had a later call refused
    # (ids outside the chunk) covered the whole chunk, so the refused call's messages were
    # in neither the memory nor, once out of the window, the request.
    session = Session(store, "refused")
    messages = [await session.append_message("user", f"fact number {n}") for n in range(6)]
    ids = [m.id for m in messages]

    def partly_refused(request: ProviderRequest) -> list[Any]:
        shown = ENTRY_HEADER.findall(request.messages[0].content)
        if request.messages[-1].role != "user":
            return [{"text": "done"}]
        good = {"text": f"saw {shown[0]}", "sourceEntryIds": [shown[0]]}
        bad = {"text": "saw the rest", "sourceEntryIds": ["not-in-this-chunk"]}
        return [
            {"tool_call": {"name": "record_observations", "arguments": {"observations": [good]}}},
            {"tool_call": {"name": "record_observations", "arguments": {"observations": [bad]}}},
        ]

    memory = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        session_model="scripted",
        observation={"provider": ScriptedProvider([partly_refused] * 20)},
    )
    await memory.flush(force=True)
    records = [
        e for e in await store.entries("refused") if e.custom_type == "om.observations.recorded"
    ]
    # One message a run: each run covers the one message it recorded from, then goes on.
    assert [r.data["coversUpToId"] for r in records] == ids
    cited = [o["sourceEntryIds"] for r in records for o in r.data["observations"]]
    assert cited == [[i] for i in ids]
