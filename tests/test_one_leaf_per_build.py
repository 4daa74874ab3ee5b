"""Context blocks built while another writer appends come from one leaf, never two.

The review found, on JSONL and PostgreSQL, 1-4% of builds pairing the memory block of one
leaf with the recent-messages block of a later one: each part read "the current leaf" on
its own. A build now reads one ``SessionStore.snapshot``, every part pinned to the leaf it
resolved first, so each build equals the build at some leaf the writer passed through.
"""

from __future__ import annotations

import asyncio

from prism_om.core.context_blocks import ContextBlock
from prism_om.observational_memory import build_observational_memory_context_blocks
from prism_om.session import Session
from prism_om.stores import SessionStore

ROUNDS = 40


async def _writer(session: Session, leaves: list[str]) -> None:
    for n in range(ROUNDS):
        user = await session.append_message("user", f"fact {n}: locker {100 + n} is free")
        leaves.append(user.id)
        reply = await session.append_message("assistant", f"noted locker {100 + n}")
        leaves.append(reply.id)
        if n % 5 == 4:
            record = await session.append_custom(
                {
                    "type": "om.observations.recorded",
                    "observations": [
                        {
                            "id": f"{n:012x}",
                            "text": f"Locker {100 + n} is free.",
                            "sourceEntryIds": [user.id],
                            "observedAt": user.timestamp,
                        }
                    ],
                    "coversUpToId": reply.id,
                }
            )
            leaves.append(record.id)
        await asyncio.sleep(0)


async def test_every_build_is_the_build_of_one_leaf(store: SessionStore) -> None:
    session = Session(store, "torn")
    first = await session.append_message("user", "start")
    leaves = [first.id]
    built: list[list[ContextBlock]] = []

    async def reader() -> None:
        while len(leaves) < 3 * ROUNDS:
            built.append(
                await build_observational_memory_context_blocks(
                    store, session_id="torn", keep_recent_entries=3
                )
            )
            await asyncio.sleep(0)

    await asyncio.gather(_writer(session, leaves), reader())
    assert built
    at_leaf: dict[str, list[ContextBlock]] = {}
    for leaf in leaves:
        at_leaf[leaf] = await build_observational_memory_context_blocks(
            store, session_id="torn", leaf_id=leaf, keep_recent_entries=3
        )
    candidates = list(at_leaf.values())
    torn = [blocks for blocks in built if blocks not in candidates]
    assert torn == []
