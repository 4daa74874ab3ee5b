"""Attach observational memory to an agent, run a few turns, then project, recall and page.

Runs with no credentials and no network: the agent's model is a scripted provider and the
memory workers are the offline, extractive baseline. Usage:

    python examples/observational_memory_lifecycle.py [path/to/store.db]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from prism_om import open_store
from prism_om.attach import create_observational_memory
from prism_om.host import Agent
from prism_om.observational_memory import (
    build_observational_memory_projection,
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.providers import ScriptedProvider
from prism_om.session import Session
from prism_om.workers import OfflineMemoryProvider

TURNS = [
    ("I'm Dana; I lead the billing team.", "Hi Dana, noted."),
    ("We ship billing 2.4 to staging on Friday 2026-12-04.", "Staging on 4 December, noted."),
    ("Migration 0042 must run first, and Sam owns it.", "Sam runs 0042 before the deploy."),
    ("The staging budget is 4200 EUR per month.", "Budget: 4200 EUR a month."),
    ("We decided to keep Postgres 16 for logical replication.", "Postgres 16 it is."),
    ("What did we decide about the database?", "Postgres 16, for logical replication."),
]


async def main(path: Path) -> None:
    async with await open_store(f"sqlite:{path}") as store:
        session = Session(store, "lifecycle")
        agent = Agent(session, ScriptedProvider([[{"text": reply}] for _, reply in TURNS]))
        memory = create_observational_memory(
            observation={"provider": OfflineMemoryProvider(), "message_tokens": 40},
            reflection={"provider": OfflineMemoryProvider(), "observation_tokens": 60},
            context={"recent_messages": 4},
        )
        attached = memory.attach(agent, session_model="offline")
        for prompt, _ in TURNS:
            await attached.agent.run(prompt)
            print(f"user: {prompt}")

        projection = await build_observational_memory_projection(store, session_id=session.id)
        print(
            f"\n{len(projection.active_observations)} active observations, "
            f"{len(projection.active_reflections)} reflections"
        )
        for observation in projection.active_observations[:5]:
            print(f"  [{observation.id}] {observation.priority:<6} {observation.text}")

        first = projection.active_observations[0]
        recalled = await recall_observational_memory(store, first.id, session_id=session.id)
        print(f"\nrecall {first.id}: found={recalled.found}")
        for source in recalled.to_json()["sources"]:
            print(f"  source {source['id']}: {source['message']['content']}")

        cursor = first.source_entry_ids[0]
        page = await recall_observational_memory_branch_page(
            store, cursor, session_id=session.id, limit=3
        )
        print(f"\npage after {cursor} (next cursor: {page.next_cursor}):")
        for message in page.messages:
            print(f"  {message['role']:<9} {message['text']}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = Path(sys.argv[1])
    else:
        target = Path(tempfile.mkdtemp(prefix="prism-om-")) / "lifecycle.db"
    asyncio.run(main(target))
