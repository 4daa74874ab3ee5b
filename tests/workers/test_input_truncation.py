"""A worker input too large for one prompt is cut with a marker, and the cut is reported.

Refusing it would stick coverage on that message forever, so the observer shows it cut
(the prompt carries a marker) and moves on; the cut reaches the debug sink, the flush's
``warnings``, the worker outcome's ``truncated_ids`` and the runtime's ``last_warning``.
"""

from __future__ import annotations

from typing import Any

from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime

LIMIT = 48 * 1024  # max_worker_message_bytes: the observer's input budget is about a third
HUGE = " ".join(
    f"Line {n}: the vendor confirmed build {n} ships on 2026-05-0{n % 9 + 1}." for n in range(800)
)


def runtime_for(session: Session, events: list[tuple[str, dict[str, Any]]]) -> Any:
    offline = OfflineMemoryProvider()
    return create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        settings={"debug_log": True},
        observation={"provider": offline, "model": "offline"},
        reflection={"provider": offline, "model": "offline"},
        debug=lambda event, data: events.append((event, data)),
        max_worker_message_bytes=LIMIT,
    )


async def test_an_oversized_message_is_observed_cut_and_the_cut_is_reported() -> None:
    assert len(HUGE.encode()) > LIMIT
    session = Session(MemoryStore(), "big")
    await session.append_message("user", "Dana owns the billing migration.")
    huge = await session.append_message("user", HUGE)
    last = await session.append_message("assistant", "Noted: the vendor list is long.")
    events: list[tuple[str, dict[str, Any]]] = []
    runtime = runtime_for(session, events)

    result = await runtime.flush(force=True)
    assert result.status == "completed"
    observer = result.outcome("observer")
    assert observer is not None and observer.truncated_ids == (huge.id,)
    assert len(result.warnings) == 1 and huge.id in result.warnings[0]
    assert "cut" in result.warnings[0] and str(LIMIT) in result.warnings[0]
    assert runtime.last_warning == result.warnings[0]
    assert ("om.worker.input_truncated", {"worker": "observer", "ids": [huge.id]}) in events
    # Coverage moved past the cut message: it never sticks on one message.
    ledger = await session.store.ledger("big")
    assert ledger.observation_covers_up_to_id == last.id

    # A later flush without a cut clears the warning.
    await session.append_message("user", "And Sam signs off the budget.")
    again = await runtime.flush(force=True)
    assert again.warnings == () and runtime.last_warning is None


async def test_an_oversized_observation_is_reflected_cut_and_reported() -> None:
    session = Session(MemoryStore(), "long-fact")
    source = await session.append_message("user", "Here is the whole vendor list.")
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                {"id": "aaaaaaaaaaaa", "text": HUGE, "sourceEntryIds": [source.id]},
                {"id": "bbbbbbbbbbbb", "text": "Dana owns billing.", "sourceEntryIds": [source.id]},
            ],
            "coversUpToId": source.id,
        }
    )
    events: list[tuple[str, dict[str, Any]]] = []
    runtime = runtime_for(session, events)
    result = await runtime.flush(force=True)
    reflector = result.outcome("reflector")
    assert reflector is not None and reflector.status == "ran"
    assert reflector.truncated_ids == ("aaaaaaaaaaaa",)
    assert any("reflector" in w and "aaaaaaaaaaaa" in w for w in result.warnings)
    assert ("om.worker.input_truncated", {"worker": "reflector", "ids": ["aaaaaaaaaaaa"]}) in events
