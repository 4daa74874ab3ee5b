"""Shared work scope demo: grant → contribute → recall → revoke, in one SQLite file.

Two sessions of one store share the scope ``build-42``. The owner opens it and grants the
participant; each session records an observation backed by its own message and binds it
to the scope; the participant resolves the scope and reads the owner's shared memory; the
owner revokes, and the participant's next resolve is denied. Run it with::

    python examples/shared_work_scope.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from prism_om.ids import create_memory_id
from prism_om.observational_memory.scope_controller import create_work_scope_controller
from prism_om.observational_memory.shared_scopes import (
    ScopeAccessEvent,
    SharedScopeSpec,
    resolve_shared_scopes,
)
from prism_om.session import Session
from prism_om.stores import open_store

SCOPE = "build-42"


async def contribute(session: Session, text: str) -> str:
    """Record one observation whose source is this session's own message; bind it."""
    message = await session.append_message("user", text)
    memory_id = create_memory_id()
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                {
                    "id": memory_id,
                    "text": text,
                    "sourceEntryIds": [message.id],
                    "observedAt": message.timestamp,
                }
            ],
            "coversUpToId": message.id,
        }
    )
    scopes = create_work_scope_controller(session=session, append_entry=session.append)
    await scopes.bind(SCOPE, [f"om:{memory_id}"])
    print(f"[{session.id}] recorded and bound observation {memory_id}: {text!r}")
    return memory_id


def audit(event: ScopeAccessEvent) -> None:
    verdict = "granted" if event.granted else "DENIED"
    print(f"  access {event.scope_id} for {event.principal_id}: {verdict} ({event.reason})")


async def main(directory: Path) -> int:
    async with await open_store(f"sqlite:{directory / 'shared.db'}") as store:
        owner, participant = Session(store, "owner-session"), Session(store, "participant")
        owner_scopes = create_work_scope_controller(session=owner, append_entry=owner.append)
        part_scopes = create_work_scope_controller(
            session=participant,
            append_entry=participant.append,
            owners={SCOPE: owner.id},  # the participant may never grant this scope
        )

        await owner.append_message("user", "Start build 42")
        await owner_scopes.open(SCOPE, kind="build", label="Build 42")
        await owner_scopes.grant(SCOPE, [participant.id])
        print(f"[{owner.id}] opened {SCOPE} and granted {participant.id}")

        await participant.append_message("user", "Joining build 42")
        await part_scopes.open(SCOPE, kind="build")
        print(f"[{participant.id}] opened {SCOPE} locally")

        owner_id = await contribute(owner, "The build uses Python 3.12 and uv.")
        await contribute(participant, "Flaky test: test_sqlite_crash on CI.")

        shared = {SCOPE: SharedScopeSpec(owner_session_id=owner.id, entries=store)}

        print(f"[{participant.id}] resolving {SCOPE}")
        result = await resolve_shared_scopes(
            scopes=shared,
            principal_id=participant.id,
            scope_map=await store.scope_map(participant.id),
            on_access=audit,
        )
        seen = result.memory[SCOPE].observations
        for observation in seen:
            print(f"  shared from {owner.id}: [{observation.id}] {observation.text}")
        if [o.id for o in seen] != [owner_id]:
            print("error: the owner's bound memory was not shared")
            return 1

        await owner_scopes.revoke(SCOPE, [participant.id])
        print(f"[{owner.id}] revoked {participant.id}")

        print(f"[{participant.id}] resolving {SCOPE} again")
        again = await resolve_shared_scopes(
            scopes=shared,
            principal_id=participant.id,
            scope_map=await store.scope_map(participant.id),
            on_access=audit,
        )
        if again.memory:
            print("error: the revoke did not land on the next resolve")
            return 1
        print("done: the revoke landed on the next resolve")
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        raise SystemExit(asyncio.run(main(Path(tmp))))
