"""The ``om:status`` and ``om:view`` commands over a host callback and every store adapter."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from prism_om.core.context_blocks import MEMORY_BLOCK_NAME
from prism_om.core.projection import active_memory
from prism_om.core.render import render_observational_memory
from prism_om.entries import SessionEntry
from prism_om.errors import AmbiguousInputError, SessionMismatchError
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    fold_observational_memory_ledger,
)
from prism_om.observational_memory.commands import (
    VIEW_USAGE,
    CommandResult,
    create_memory_status_command,
    create_memory_view_command,
    create_observational_memory_commands,
)
from prism_om.stores.base import SessionStore
from prism_om.testing.conformance import StoreOpener
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder, random_builder

SECRET = "sk-cmd-secret-77"


@pytest.fixture
def builder() -> BranchBuilder:
    return random_builder(13, 60, secrets=[SECRET])


@pytest.fixture
async def store(store_opener: StoreOpener, builder: BranchBuilder) -> AsyncIterator[SessionStore]:
    opened = await store_opener.open()
    await load_builder(opened, builder)
    yield opened
    await opened.close()


@dataclass
class FakeRuntime:
    in_flight: bool = True
    last_error: Exception | None = None


def sources(store: SessionStore, builder: BranchBuilder) -> list[dict[str, Any]]:
    async def async_entries(session_id: str) -> list[SessionEntry]:
        return list(builder.path)

    return [
        {"store": store},
        {"get_entries": async_entries},
        {"get_entries": lambda sid: list(builder.path)},
    ]


async def test_status_counts(store: SessionStore, builder: BranchBuilder) -> None:
    ledger = fold_observational_memory_ledger(builder.path)
    active_obs, active_refl = active_memory(ledger)
    blocks = build_observational_memory_context_blocks(builder.path, secrets=[SECRET])
    memory_block = next((b for b in blocks if b.name == MEMORY_BLOCK_NAME), None)
    results = []
    for source in sources(store, builder):
        status = create_memory_status_command(**source, secrets=[SECRET])
        assert status.name == "om:status"
        result = await status.run("", session_id="s1")
        assert isinstance(result, CommandResult)
        results.append(result)
        data = result.data
        assert data["observations"]["recorded"] == len(ledger.observations)
        assert data["observations"]["dropped"] == len(ledger.dropped_observation_ids)
        assert data["observations"]["active"] == len(active_obs)
        shown = memory_block.memory_ids if memory_block else ()
        visible_obs = [i for i in shown if i in ledger.observations_by_id]
        assert data["observations"]["visible"] == len(visible_obs)
        visible_refl = [i for i in shown if i in ledger.reflections_by_id]
        assert len(visible_refl) <= len(active_refl)
        assert data["reflections"] == {
            "recorded": len(ledger.reflections),
            "superseded": len(ledger.supersessions),
            "active": len(active_refl),
            "visible": len(visible_refl),
        }
        assert data["tokens"]["renderedMemory"] == (memory_block.tokens if memory_block else 0)
        assert data["tokens"]["observationPool"] >= 0
        assert data["runtime"] is None
        assert "observations: recorded" in result.text
        json.dumps(data)
    assert all(r == results[0] for r in results)


async def test_status_runtime_state_is_redacted(store: SessionStore) -> None:
    runtime = FakeRuntime(last_error=RuntimeError(f"provider refused key {SECRET}"))
    status = create_memory_status_command(store=store, runtime=runtime, secrets=[SECRET])
    result = await status.run("", session_id="s1")
    assert result.data["runtime"]["inFlight"] is True
    assert "[REDACTED]" in result.data["runtime"]["lastError"]
    assert SECRET not in result.text and SECRET not in json.dumps(result.data)
    assert "in flight yes" in result.text
    # A runtime-like object without those attributes reads as idle.
    bare = create_memory_status_command(store=store, runtime=object())
    assert (await bare.run("", session_id="s1")).data["runtime"] == {
        "inFlight": False,
        "lastError": None,
    }


async def test_view_visible_and_full(store: SessionStore, builder: BranchBuilder) -> None:
    ledger = fold_observational_memory_ledger(builder.path)
    active_obs, active_refl = active_memory(ledger)
    blocks = build_observational_memory_context_blocks(builder.path, secrets=[SECRET])
    memory_block = next((b for b in blocks if b.name == MEMORY_BLOCK_NAME), None)
    full_text = render_observational_memory(
        [r.reflection for r in active_refl],
        [r.observation for r in active_obs],
        secrets=[SECRET],
    )
    for source in sources(store, builder):
        view = create_memory_view_command(**source, secrets=[SECRET])
        assert view.name == "om:view"
        visible = await view.run("", session_id="s1")
        assert visible.data["mode"] == "visible"
        if memory_block is not None:
            assert visible.text == memory_block.text
            assert tuple(visible.data["reflectionIds"] + visible.data["observationIds"]) == (
                memory_block.memory_ids
            )
        full = await view.run("  full ", session_id="s1")
        assert full.data["mode"] == "full"
        assert full.text == (full_text or "No observational memory yet.")
        assert SECRET not in visible.text + full.text


@pytest.mark.parametrize("args", ["all", "full full", "FULL", "--full"])
async def test_view_usage(store: SessionStore, args: str) -> None:
    view = create_memory_view_command(store=store)
    result = await view.run(args, session_id="s1")
    assert result.text == VIEW_USAGE == "Usage: /om:view [full]"
    assert result.data["error"] == "usage"


async def test_empty_session_view(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        b = BranchBuilder(session_id="empty", rng=random.Random(0))
        b.message("user", "hello")
        await load_builder(store, b)
        view = create_memory_view_command(store=store)
        result = await view.run("", session_id="empty")
        assert result.text == "No observational memory yet."
        status = create_memory_status_command(get_entries=lambda sid: list(b.path))
        data = (await status.run("", session_id="empty")).data
        assert data["observations"]["recorded"] == 0
        assert data["tokens"] == {"observationPool": 0, "renderedMemory": 0}
    finally:
        await store.close()


async def test_wrong_session_fails_closed(store: SessionStore, builder: BranchBuilder) -> None:
    for source in sources(store, builder):
        commands = create_observational_memory_commands(**source)
        status, view = commands
        for command in (status, view):
            with pytest.raises(SessionMismatchError):
                await command.run("", session_id="other")


def test_factories_need_exactly_one_source(store: SessionStore) -> None:
    with pytest.raises(AmbiguousInputError):
        create_memory_status_command()
    with pytest.raises(AmbiguousInputError):
        create_memory_view_command(store=store, get_entries=lambda sid: [])
    commands = create_observational_memory_commands(store=store)
    assert [c.name for c in commands] == ["om:status", "om:view"]
