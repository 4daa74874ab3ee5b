"""A writer process that appends turns and memory records to one session, for the tests
that read while another process writes.

``python memory_writer.py URL SESSION ROUNDS`` opens its own store, appends ROUNDS turns (a
user message and a reply, and every fifth turn an observation record covering them), one
append each, and prints each appended entry's id on its own line as it goes.
"""

from __future__ import annotations

import asyncio
import sys

from prism_om.session import Session
from prism_om.stores import open_store


async def write(url: str, session_id: str, rounds: int) -> None:
    async with await open_store(url) as store:
        session = Session(store, session_id)
        for n in range(rounds):
            user = await session.append_message("user", f"fact {n}: locker {100 + n} is free")
            print(user.id, flush=True)
            reply = await session.append_message("assistant", f"noted locker {100 + n}")
            print(reply.id, flush=True)
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
                print(record.id, flush=True)


if __name__ == "__main__":
    asyncio.run(write(sys.argv[1], sys.argv[2], int(sys.argv[3])))
