"""The funnel's workspace copies chain with the workspace's own writers (issue 13, item 3)."""

from __future__ import annotations

import asyncio

from prism_om.funnel import funnel_child_messages_to_workspace
from prism_om.session import Session
from prism_om.testing.conformance import StoreOpener


async def test_workspace_writer_and_funnel_copies_share_one_branch(
    store_opener: StoreOpener,
) -> None:
    inner = await store_opener.open()
    store = funnel_child_messages_to_workspace(inner, "workspace")
    try:
        workspace = Session(inner, "workspace")
        await workspace.append_message("user", "the plan")
        children = [Session(store, f"child{n}") for n in range(3)]  # type: ignore[arg-type]

        async def child_work(session: Session) -> None:
            for turn in range(4):
                await session.append_message("user", f"{session.id} step {turn}")

        async def workspace_work() -> None:
            for turn in range(6):
                await workspace.append_message("assistant", f"workspace note {turn}")

        await asyncio.gather(workspace_work(), *(child_work(s) for s in children))
        assert len(await inner.leaves("workspace")) == 1
        assert len(await inner.entries("workspace")) == 1 + 6 + 12
    finally:
        await inner.close()
