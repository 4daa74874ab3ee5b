"""The inert extension, the cross-session funnel, and the lifecycle example."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from prism_om.attach import create_observational_memory
from prism_om.extension import create_observational_memory_extension
from prism_om.funnel import funnel_child_messages_to_workspace
from prism_om.host import Agent
from prism_om.providers import ScriptedProvider
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OfflineMemoryProvider

ROOT = Path(__file__).resolve().parent.parent


class RecordingStore(MemoryStore):
    """Records every store method called, to prove setup touches nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.touches: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if not name.startswith("_") and callable(value) and name != "touches":
            super().__getattribute__("touches").append(name)
        return value


class RecordingHost:
    def __init__(self) -> None:
        self.strategies: dict[str, Any] = {}
        self.tools: list[Any] = []
        self.commands: list[Any] = []

    def register_compaction_strategy(self, name: str, strategy: Any) -> None:
        self.strategies[name] = strategy

    def register_tool(self, tool: Any) -> None:
        self.tools.append(tool)

    def register_command(self, command: Any) -> None:
        self.commands.append(command)


class RecordingProvider(OfflineMemoryProvider):
    calls = 0

    def generate(self, request: Any) -> Any:
        RecordingProvider.calls += 1
        return super().generate(request)


async def test_extension_setup_registers_and_starts_nothing() -> None:
    store = RecordingStore()
    extension = create_observational_memory_extension(
        recall_tool={"store": store}, commands={"store": store}
    )
    host = RecordingHost()
    extension.setup(host)
    await asyncio.sleep(0)
    assert list(host.strategies) == ["observational-memory"]
    assert [t.name for t in host.tools] == ["recall"]
    assert sorted(c.name for c in host.commands) == ["om:status", "om:view"]
    assert store.touches == []
    assert RecordingProvider.calls == 0
    disabled = RecordingHost()
    create_observational_memory_extension(recall_tool={"store": store}, disabled=True).setup(
        disabled
    )
    assert not disabled.strategies and not disabled.tools and not disabled.commands
    await store.leaf("anyone")  # the recorder does see a real touch
    assert store.touches == ["leaf"]


async def test_creating_and_attaching_memory_touch_no_store_or_provider() -> None:
    store = RecordingStore()
    agent = Agent(Session(store, "quiet"), ScriptedProvider([]))
    store.touches.clear()
    om = create_observational_memory(observation={"provider": RecordingProvider()})
    om.attach(agent)
    await asyncio.sleep(0)
    assert store.touches == [] and RecordingProvider.calls == 0


async def test_funnel_copies_child_messages_with_new_ids(store_opener: StoreOpener) -> None:
    inner = await store_opener.open()
    store = funnel_child_messages_to_workspace(inner, "workspace")
    try:
        children = [Session(store, f"child{n}") for n in range(4)]  # type: ignore[arg-type]

        async def child_work(session: Session) -> None:
            for turn in range(5):
                await session.append_message("user", f"{session.id} step {turn}")
                await session.append_custom({"type": "app.note", "n": turn})

        await asyncio.gather(*(child_work(s) for s in children))
        workspace = await inner.entries("workspace")
        assert len(workspace) == 20, "every eligible child message copied, no fork"
        assert len(await inner.leaves("workspace")) == 1
        child_ids = {e.id for s in children for e in await inner.list(s.id)}
        assert not child_ids & {e.id for e in workspace}
        assert all(e.kind == "message" for e in workspace)
        # A parent session resumed from the persisted leaf continues the same branch.
        parent = Session(inner, "workspace")
        await parent.append_message("assistant", "summary of the children")
        assert len(await inner.entries("workspace")) == 21
    finally:
        await inner.close()


def test_lifecycle_example_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "observational_memory_lifecycle.py"),
            str(tmp_path / "x.db"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "recall" in done.stdout and "found=True" in done.stdout
    assert "page after" in done.stdout
