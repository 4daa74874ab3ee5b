"""Context blocks built while another writer appends come from one leaf, never two.

The review found, on JSONL and PostgreSQL, 1-4% of builds pairing the memory block of one
leaf with the recent-messages block of a later one: each part read "the current leaf" on
its own, while another process appended. A build now reads one ``SessionStore.snapshot``,
every part pinned to the leaf it resolved first, so each build equals the build at some
leaf the writer passed through.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from prism_om.core.context_blocks import ContextBlock
from prism_om.observational_memory import build_observational_memory_context_blocks
from prism_om.session import Session
from prism_om.stores import SessionStore

ROUNDS = 60
WRITER = Path(__file__).parent / "support" / "memory_writer.py"


async def _in_process(store: SessionStore, leaves: list[str]) -> None:
    """The memory store has no second process: a task writes, yielding between appends."""
    session = Session(store, "torn")
    for n in range(ROUNDS):
        for role, text in (("user", f"fact {n}"), ("assistant", f"noted {n}")):
            leaves.append((await session.append_message(role, text)).id)  # type: ignore[arg-type]
        await asyncio.sleep(0)


async def _other_process(url: str, leaves: list[str]) -> None:
    writer = await asyncio.create_subprocess_exec(
        sys.executable, str(WRITER), url, "torn", str(ROUNDS), stdout=asyncio.subprocess.PIPE
    )
    assert writer.stdout is not None
    async for line in writer.stdout:
        leaves.append(line.decode().strip())
    assert await writer.wait() == 0


async def test_every_build_is_the_build_of_one_leaf(store: SessionStore) -> None:
    first = await Session(store, "torn").append_message("user", "start")
    leaves = [first.id]
    built: list[list[ContextBlock]] = []
    done = asyncio.Event()

    async def writer() -> None:
        try:
            if store.url.startswith("memory:"):
                await _in_process(store, leaves)
            else:
                await _other_process(store.url, leaves)
        finally:
            done.set()

    async def reader() -> None:
        while not done.is_set():
            built.append(
                await build_observational_memory_context_blocks(
                    store, session_id="torn", keep_recent_entries=3
                )
            )
            await asyncio.sleep(0)

    await asyncio.gather(writer(), reader())
    assert len(built) > 10
    candidates: list[list[ContextBlock]] = []
    for leaf in leaves:
        candidates.append(
            await build_observational_memory_context_blocks(
                store, session_id="torn", leaf_id=leaf, keep_recent_entries=3
            )
        )
    torn = [blocks for blocks in built if blocks not in candidates]
    assert torn == []
