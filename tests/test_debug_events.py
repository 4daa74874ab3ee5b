"""Debug events (issue 12 items 2 and 3): one emitter that redacts every event and gates
trace events behind ``debug_log``, while error events always reach a given sink."""

from __future__ import annotations

import ast
import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

import prism_om
from prism_om import debug as debug_module
from prism_om.attach import COMPACTION_TRIGGER_ERROR, create_observational_memory
from prism_om.core.redaction import REDACTION_MARKER
from prism_om.debug import (
    DEBUG_EVENTS,
    ERROR_EVENTS,
    TRACE_EVENTS,
    WARNING_EVENTS,
    DebugEmitter,
    is_error_event,
)
from prism_om.errors import InvalidInputError
from prism_om.host import Agent
from prism_om.host.agent import CompactionRequest
from prism_om.providers import ProviderEvent, ProviderRequest, ScriptedProvider, TextEvent
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime

SECRET = 'tok"en\\-SECRET-42'
Events = list[tuple[str, dict[str, Any]]]


def forms(secret: str = SECRET) -> list[str]:
    once = [secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]]
    return [*once, *(json.dumps(f)[1:-1] for f in once)]


def assert_clean(events: Events) -> None:
    for event, data in events:
        dumped = json.dumps(data, ensure_ascii=False) + repr(data)
        for form in forms():
            assert form not in dumped, f"{event} leaked the secret as {form!r}: {data!r}"


# -- every event name the code can emit -----------------------------------------------

_EMITTERS = {"_emit", "emit_debug_event", "_emit_debug"}


def emitted_event_names() -> dict[str, list[str]]:
    """Event names passed to an emitting call anywhere in the package, with where."""
    root = Path(prism_om.__file__).parent
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.AnnAssign | ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name not in _EMITTERS:
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                value = first.value
            elif isinstance(first, ast.Name) and first.id in constants:
                value = constants[first.id]
            elif isinstance(first, ast.Name) and hasattr(debug_module, first.id):
                value = getattr(debug_module, first.id)
            else:
                continue  # a pass-through (``event``): the emitter itself
            found.setdefault(value, []).append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_every_emitted_event_is_registered_and_every_registered_event_is_emitted() -> None:
    found = emitted_event_names()
    unknown = {name: where for name, where in found.items() if name not in DEBUG_EVENTS}
    assert not unknown, f"events missing from prism_om.debug's registry: {unknown}"
    assert set(found) == set(DEBUG_EVENTS), set(DEBUG_EVENTS) - set(found)
    assert ERROR_EVENTS.isdisjoint(TRACE_EVENTS)
    assert WARNING_EVENTS.isdisjoint(ERROR_EVENTS | TRACE_EVENTS)
    assert not any(is_error_event(e) for e in WARNING_EVENTS)
    assert all(is_error_event(e) for e in ERROR_EVENTS)
    assert not any(is_error_event(e) for e in TRACE_EVENTS)


def secret_payload() -> dict[str, Any]:
    return {
        "error": f"boom: {SECRET}",
        "nested": {"list": [SECRET, json.dumps({"k": SECRET})], "repr": repr(SECRET)},
        SECRET: "as a key",
    }


@pytest.mark.parametrize("event", sorted(DEBUG_EVENTS))
def test_each_event_type_is_redacted_on_its_way_out(event: str) -> None:
    events: Events = []
    errors: list[str] = []
    emit = DebugEmitter(
        lambda e, d: events.append((e, d)), [SECRET], trace=True, on_error=errors.append
    )
    emit(event, secret_payload())
    assert [e for e, _ in events] == [event]
    assert_clean(events)
    assert REDACTION_MARKER in json.dumps(events[0][1])
    if event in ERROR_EVENTS:
        assert errors == [f"boom: {REDACTION_MARKER}"]
    else:
        assert errors == []


@pytest.mark.parametrize("event", sorted(DEBUG_EVENTS))
def test_without_debug_log_only_error_and_warning_events_reach_the_sink(event: str) -> None:
    events: Events = []
    errors: list[str] = []
    emit = DebugEmitter(lambda e, d: events.append((e, d)), [SECRET], on_error=errors.append)
    emit(event, secret_payload())
    delivered = event in ERROR_EVENTS or event in WARNING_EVENTS
    assert [e for e, _ in events] == ([event] if delivered else [])
    # A warning (work went on in a reduced form) is delivered but is not a failure.
    assert bool(errors) == (event in ERROR_EVENTS)
    assert_clean(events)


# -- the real paths -------------------------------------------------------------------


def echo_provider() -> ScriptedProvider:
    def reply(request: ProviderRequest) -> list[Any]:
        return [TextEvent("Noted.")]

    return ScriptedProvider([reply] * 200)


OFFLINE = OfflineMemoryProvider()


def memory(events: Events, debug_log: bool, **options: Any) -> Any:
    return create_observational_memory(
        {
            "observation": {"provider": OFFLINE, "model": "offline", "message_tokens": 20},
            "reflection": {"provider": OFFLINE, "model": "offline", "observation_tokens": 40},
            "dropper": {"policy": "lowest-relevance"},
            "debug_log": debug_log,
        },
        secrets=[SECRET],
        debug=lambda e, d: events.append((e, d)),
        **options,
    )


@pytest.mark.parametrize("debug_log", [False, True])
async def test_a_raising_should_compact_is_reported_redacted_and_sets_last_error(
    debug_log: bool,
) -> None:
    events: Events = []

    def gate(context: Any) -> bool:
        raise RuntimeError(f"gate saw {SECRET}")

    agent = Agent(Session(MemoryStore(), "s1"), echo_provider())
    attached = memory(events, debug_log, should_compact=gate).attach(agent)
    await attached.agent.run(f"My token is {SECRET}, the launch is on Friday 14 June.")
    names = [e for e, _ in events]
    assert COMPACTION_TRIGGER_ERROR in names
    assert_clean(events)
    error = dict(events)[COMPACTION_TRIGGER_ERROR]["error"]
    assert error == f"RuntimeError: gate saw {REDACTION_MARKER}"
    assert attached.runtime.last_error == error
    if debug_log:
        assert "om.flush.start" in names and "om.append" in names
    else:
        assert names == [COMPACTION_TRIGGER_ERROR]


@pytest.mark.parametrize("debug_log", [False, True])
async def test_a_raising_compaction_request_hook_is_reported_redacted(debug_log: bool) -> None:
    events: Events = []

    async def hook(request: CompactionRequest) -> CompactionRequest:
        raise InvalidInputError(f"hook refused: {json.dumps({'token': SECRET})}")

    agent = Agent(Session(MemoryStore(), "s1"), echo_provider(), compaction_hooks=[hook])
    attached = memory(events, debug_log, trigger={"type": "entries", "count": 1}).attach(agent)
    await attached.agent.run("The launch moved to Friday 14 June.")
    names = [e for e, _ in events]
    assert "observational-memory:post-run-error" in names
    assert_clean(events)
    assert REDACTION_MARKER in (attached.runtime.last_error or "")
    assert SECRET not in (attached.runtime.last_error or "")
    assert ("om.flush.done" in names) is debug_log


class FailingProvider:
    provider_id = "failing"

    async def generate(self, request: ProviderRequest) -> AsyncGenerator[ProviderEvent, None]:
        raise RuntimeError(f"upstream said {SECRET}")
        yield  # pragma: no cover


@pytest.mark.parametrize("debug_log", [False, True])
async def test_a_failed_worker_reaches_the_sink_whatever_debug_log_says(debug_log: bool) -> None:
    events: Events = []
    session = Session(MemoryStore(), "s1")
    await session.append_message("user", f"The vault key is {SECRET}.")
    runtime = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": FailingProvider(), "model": "m"},
        settings={"debug_log": debug_log},
        secrets=[SECRET],
        debug=lambda e, d: events.append((e, d)),
    )
    result = await runtime.flush(force=True)
    assert result.status == "failed"
    names = [e for e, _ in events]
    assert "om.worker.failed" in names
    assert_clean(events)
    if not debug_log:
        assert names == ["om.worker.failed"]
    else:
        assert {"om.flush.start", "om.flush.done"} <= set(names)


async def test_a_full_attached_session_emits_nothing_secret() -> None:
    events: Events = []
    agent = Agent(Session(MemoryStore(), "s1"), echo_provider())
    attached = memory(events, True, trigger={"type": "entries", "count": 6}).attach(agent)
    for turn in range(8):
        await attached.agent.run(f"Turn {turn}: keep the token {SECRET} for the 14 June launch.")
    names = {e for e, _ in events}
    assert {"om.flush.start", "om.flush.done", "om.append", "om.worker.completed"} <= names
    assert attached.compactions
    assert_clean(events)


async def test_a_hook_raising_a_foreign_error_does_not_fail_the_turn() -> None:
    events: Events = []

    async def hook(request: CompactionRequest) -> CompactionRequest:
        raise KeyError(f"hook lost {SECRET}")

    store = MemoryStore()
    agent = Agent(Session(store, "s1"), echo_provider(), compaction_hooks=[hook])
    attached = memory(events, False, trigger={"type": "entries", "count": 1}).attach(agent)
    reply = await attached.agent.run("The launch moved to Friday 14 June.")
    # The turn is stored and returned; the hook's failure is reported, redacted.
    assert reply is not None
    assert [e.role for e in await store.entries("s1") if e.kind == "message"][:2] == [
        "user",
        "assistant",
    ]
    assert [e for e, _ in events] == ["observational-memory:post-run-error"]
    assert_clean(events)
    assert (attached.runtime.last_error or "").startswith("KeyError: ")
