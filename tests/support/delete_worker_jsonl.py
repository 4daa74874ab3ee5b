"""A second process for tests/stores/test_jsonl_delete_protocol.py (run with sys.executable).

Modes:

* ``kill DIR SESSION STEP``: delete SESSION and die (``os._exit(9)``) just before the
  delete's STEP-th call that changes a file (a write, a rename, an unlink, an fsync or a
  truncate, counted from the start of ``delete_session``); when the delete has fewer
  steps, print ``steps N`` (how many it made) and exit 0. The data file is zeroed 4 KiB
  per write here, so a kill lands between zeroing writes too.
* ``pause DIR SESSION``: delete SESSION, stopping before each call that changes a file
  (as ``kill`` counts them): prints ``step N`` and waits for a line on stdin; prints
  ``done`` at the end.
* ``churn DIR SESSION ROUNDS ENTRIES``: ROUNDS times, write SESSION as one batch of
  ENTRIES messages whose ids start with ``r<round>.``, then delete it; prints ``round N``
  after each delete.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

from prism_om.entries import message_entry
from prism_om.stores.jsonl import JsonlStore
from prism_om.stores.jsonl import deletion as jsonl_deletion

_CHANGES = ("write", "pwrite", "replace", "rename", "unlink", "fsync", "ftruncate")


def _die_at(step: int, *, pause: bool = False) -> tuple[Callable[[], None], Callable[[], int]]:
    """Wrap the os calls that change files; returns the switch that starts the count and
    the count so far. With ``pause``, each call waits for a line on stdin instead."""
    calls = 0
    armed = False

    def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            if armed:
                calls += 1
                if pause:
                    print(f"step {calls}", flush=True)
                    sys.stdin.readline()
                elif calls == step:
                    os._exit(9)
            return real(*args, **kwargs)

        return call

    for name in _CHANGES:
        setattr(os, name, wrap(getattr(os, name)))

    def arm() -> None:
        nonlocal armed
        armed = True

    return arm, lambda: calls


async def kill(directory: str, session: str, step: int) -> None:
    jsonl_deletion._ZERO_CHUNK = 4096  # the delete zeroes in small steps
    arm, count = _die_at(step)
    store = await JsonlStore.open(directory)
    await store.list(session)  # loaded first, so only the delete's own steps are counted
    arm()
    await store.delete_session(session)
    print(f"steps {count()}", flush=True)
    await store.close()


async def pause(directory: str, session: str) -> None:
    jsonl_deletion._ZERO_CHUNK = 4096  # the delete zeroes in small steps
    arm, _ = _die_at(0, pause=True)
    store = await JsonlStore.open(directory)
    await store.list(session)
    print("ready", flush=True)
    arm()
    await store.delete_session(session)
    print("done", flush=True)
    await store.close()


async def churn(directory: str, session: str, rounds: int, entries: int) -> None:
    async with await JsonlStore.open(directory, fsync=False) as store:
        for n in range(rounds):
            batch = []
            for i in range(entries):
                parent = batch[-1].id if batch else None
                text = f"round {n} message {i} " + "lorem ipsum " * 20
                batch.append(
                    message_entry(session, "user", text, parent_id=parent, entry_id=f"r{n}.{i}")
                )
            await store.append_many(batch)
            await store.delete_session(session)
            print(f"round {n}", flush=True)


def main(argv: list[str]) -> None:
    mode, directory, *rest = argv
    if mode == "kill":
        asyncio.run(kill(directory, rest[0], int(rest[1])))
    elif mode == "pause":
        asyncio.run(pause(directory, rest[0]))
    elif mode == "churn":
        asyncio.run(churn(directory, rest[0], int(rest[1]), int(rest[2])))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
