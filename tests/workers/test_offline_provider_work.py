"""The offline provider extracts a prompt once per worker run, off the event loop's thread.

A worker loop asks the provider again after each turn of tool calls with the same prompt
(a long transcript makes several turns of ``calls_per_turn`` calls); extracting it again
each time repeated the whole work. The extraction is pure Python CPU, so it runs on a
thread: an agent whose memory works in the background keeps answering meanwhile.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.testing.dialog import dialog_turns
from prism_om.workers import OfflineMemoryProvider
from prism_om.workers import offline as offline_module
from prism_om.workers.one_model import one_model_runtime


async def test_one_extraction_per_prompt_and_none_on_the_loop_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, str]] = []
    prompts: list[str] = []
    batches: list[int] = []
    real = offline_module._extract_calls

    def counted(name: str, prompt: str) -> list[dict[str, Any]]:
        seen.append((name, threading.current_thread().name))
        prompts.append(prompt)
        calls = real(name, prompt)
        batches.append(len(calls))
        return calls

    monkeypatch.setattr(offline_module, "_extract_calls", counted)
    session = Session(MemoryStore(), "long")
    for turn in dialog_turns(60):
        await session.append_message("user", turn.user)
        await session.append_message("assistant", turn.assistant)
    # One call per turn: the observer's loop takes many turns over the same prompt.
    provider = OfflineMemoryProvider(calls_per_turn=1)
    runtime = one_model_runtime(session, provider, "offline")
    result = await runtime.flush(force=True)
    assert result is not None
    ledger = await session.store.ledger("long")
    assert len(ledger.observations) > 1
    # Some run took several turns (one call each) over its prompt, yet every prompt was
    # extracted once.
    assert max(batches) > 1
    assert len(prompts) == len(set(prompts))
    assert all(thread != threading.main_thread().name for _, thread in seen)
