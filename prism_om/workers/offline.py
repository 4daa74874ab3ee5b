"""``OfflineMemoryProvider``: deterministic, extractive memory workers with no model at all.

A baseline that needs no network and no credentials. It reads the worker prompt the
runtime builds (entry headers and observation lines are parseable, see
:mod:`.transcript`) and answers with tool calls:

* observer (:mod:`.offline_observe`): one observation per statement of fact, merging a
  message's sentences and collapsing duplicates; chatter (greetings, thanks,
  acknowledgements, reactions) dropped; priority from the content, never the role
  (numbers, dates, names, decisions, commitments and preferences high; questions low);
  dates resolved against the message's time and dates written in it; tool calls and
  results summarised (tool, target, outcome, error class) instead of copied.
* reflector (:mod:`.offline_reflect`): one reflection per day and subject, stating the
  group's facts tersely.
* dropper: records nothing; pair it with ``dropper.policy = "lowest-relevance"``.

A real model writes far better memory: it resolves references, merges facts across
messages and judges what matters. Use this where none is available, in tests, demos and
offline tools.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Final

from ..providers.base import DoneEvent, ProviderEvent, ProviderRequest, ToolCallEvent
from .model import Model
from .offline_observe import extract_observations
from .offline_reflect import group_reflections
from .tools import RECORD_OBSERVATIONS, RECORD_REFLECTIONS
from .transcript import parse_observation_lines, parse_transcript

__all__ = ["OFFLINE_MODEL", "OfflineMemoryProvider", "extract_observations", "group_reflections"]

OFFLINE_MODEL: Final = Model(id="prism-om-offline", provider="offline")

_PER_CALL: Final = 40
_CALL_BYTES: Final = 24 * 1024
_CALLS_PER_TURN: Final = 8


def _batches(key: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool arguments holding ``items`` in calls of bounded count and size."""
    calls: list[dict[str, Any]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for item in items:
        item_size = len(json.dumps(item, ensure_ascii=False).encode("utf-8")) + 1
        if current and (len(current) >= _PER_CALL or size + item_size > _CALL_BYTES):
            calls.append({key: current})
            current, size = [], 0
        current.append(item)
        size += item_size
    if current:
        calls.append({key: current})
    return calls


def _extract_calls(name: str, prompt: str) -> list[dict[str, Any]]:
    """The tool calls' arguments the offline worker makes for ``prompt``, in batches."""
    if name == RECORD_OBSERVATIONS:
        return _batches("observations", extract_observations(parse_transcript(prompt)))
    return _batches("reflections", group_reflections(parse_observation_lines(prompt)))


class OfflineMemoryProvider:
    """A ``Provider`` whose observer and reflector are extractive and deterministic."""

    provider_id = "offline"
    model = OFFLINE_MODEL

    def __init__(self, *, calls_per_turn: int = _CALLS_PER_TURN) -> None:
        self.calls_per_turn = calls_per_turn
        # The calls of the last prompt: a worker loop asks again with the same prompt after
        # each turn of tool calls, and extracting it again would repeat the whole work.
        self._last: tuple[str, str, list[dict[str, Any]]] | None = None

    async def generate(self, request: ProviderRequest) -> AsyncGenerator[ProviderEvent, None]:
        tools = {t.name for t in request.tools}
        prompt = next((m.content for m in request.messages if m.role == "user"), "")
        made = sum(len(m.tool_calls) for m in request.messages)
        name: str | None = None
        calls: list[dict[str, Any]] = []
        if RECORD_OBSERVATIONS in tools:
            name = RECORD_OBSERVATIONS
        elif RECORD_REFLECTIONS in tools:
            name = RECORD_REFLECTIONS
        if name is not None:
            last = self._last
            if last is not None and last[0] == name and last[1] == prompt:
                calls = last[2]
            else:
                # Pure Python CPU (a large prompt takes tenths of a second): on a thread, so
                # an agent whose memory works in the background keeps answering meanwhile
                # (the event loop gets the GIL at every switch interval, not after the run).
                calls = await asyncio.to_thread(_extract_calls, name, prompt)
                self._last = (name, prompt, calls)
        pending = calls[made : made + self.calls_per_turn]
        for offset, arguments in enumerate(pending):
            yield ToolCallEvent(
                id=f"offline_{made + offset}",
                name=name or "",
                arguments=json.dumps(arguments, ensure_ascii=False),
            )
        yield DoneEvent("tool_calls" if pending else "stop")

    async def aclose(self) -> None:
        """Nothing to release."""
