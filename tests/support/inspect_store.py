"""A small store for the inspect page's tests: two sessions, memory, a fork, hostile text."""

from __future__ import annotations

import html
from dataclasses import dataclass
from urllib.parse import quote

from prism_om.observational_memory.revocation import create_deletion_propagator
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.workers import OfflineMemoryProvider
from prism_om.workers.one_model import one_model_runtime

SECRET = "sk-live-Zq9<x>\"&'/ab"
XSS = "<script>alert('pwned')</script>"
ATTRIBUTE_BREAK = '" onmouseover="alert(1)" x="\' ><img src=x onerror=alert(2)>'

USER_TURNS = [
    "My name is Ada and I work on the billing service in Rust.",
    f"Remember my API key is {SECRET} but never repeat it.",
    f"I pasted this snippet: {XSS} and a title {ATTRIBUTE_BREAK}",
    f"The key again, encoded: {quote(SECRET, safe='')} and escaped: {html.escape(SECRET)}",
    "We decided to ship the invoice export on Friday 2026-12-04.",
    "My favourite editor is Helix and I prefer tabs over spaces.",
    "The staging database lives on db-staging-2 and migrations run nightly.",
]


REVOKED_MESSAGE = "Temporary note: the on-call phone number is 555-0100."
REVOKED_OBSERVATION = "abcdef012345"
SUPERSEDING_REFLECTION = "feedc0ffee01"


async def _every_state(store: SessionStore, session: Session) -> None:
    """One observation dropped, the reflection superseded, one observed message revoked."""
    ledger = await store.ledger(session.id)
    observations = [r.observation for r in ledger.observations]
    await session.append_custom(
        {"type": "om.observations.dropped", "observationIds": [observations[-1].id]}
    )
    old = ledger.reflections[0].reflection
    await session.append_custom(
        {
            "type": "om.reflections.recorded",
            "reflections": [
                {
                    "id": SUPERSEDING_REFLECTION,
                    "text": "Ada builds the billing service in Rust and ships the export Friday.",
                    "observationIds": [observations[0].id, observations[1].id],
                    "priority": "high",
                    "supersedesReflectionIds": [old.id],
                }
            ],
        }
    )
    note = await session.append_message("user", REVOKED_MESSAGE)
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                {"id": REVOKED_OBSERVATION, "text": REVOKED_MESSAGE, "sourceEntryIds": [note.id]}
            ],
        }
    )
    await create_deletion_propagator(store).propagate("users", [note.id], reason="revoked")


@dataclass
class Filled:
    session_id: str
    fork_leaf: str
    main_leaf: str
    fork_text: str


async def fill_store(store: SessionStore, session_id: str = "demo") -> Filled:
    session = Session(store, session_id)
    first_reply = ""
    for index, text in enumerate(USER_TURNS):
        await session.append_message("user", text)
        reply = await session.append_message("assistant", f"Noted point {index + 1}: {text}")
        if index == 1:
            first_reply = reply.id
    runtime = one_model_runtime(session, OfflineMemoryProvider(), "offline")
    await runtime.flush(force=True)
    await _every_state(store, session)
    main_leaf = await store.leaf(session_id)
    assert main_leaf is not None
    # A fork after the second exchange: the other branch of the conversation.
    await session.checkout(first_reply)
    fork_text = "On second thought, let us talk about the fork branch instead."
    fork = await session.append_message("user", fork_text)
    await session.checkout(main_leaf)
    other = Session(store, "other-session")
    await other.append_message("user", "A second, unrelated session.")
    return Filled(session_id, fork.id, main_leaf, fork_text)
