"""Stores built for CLI tests: chains of messages per session, and ``main`` run in-process."""

from __future__ import annotations

import asyncio

import pytest

from prism_om.cli import main
from prism_om.entries import SessionEntry, message_entry
from prism_om.stores import open_store


def chain(sid: str, count: int) -> list[SessionEntry]:
    """``count`` user messages of ``sid``, each the child of the one before, ids ``sid-N``."""
    out: list[SessionEntry] = []
    for i in range(count):
        parent = out[-1].id if out else None
        out.append(
            message_entry(
                sid, "user", f"{sid} {i} " + "x" * 150, parent_id=parent, entry_id=f"{sid}-{i}"
            )
        )
    return out


def build(url: str, sessions: dict[str, int]) -> None:
    """A store at ``url`` holding one chain per session, of the given lengths."""

    async def run() -> None:
        async with await open_store(url) as store:
            for sid, count in sessions.items():
                await store.append_many(chain(sid, count))

    asyncio.run(run())


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``prism-om ARGS`` in this process: exit code, stdout, stderr."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err
