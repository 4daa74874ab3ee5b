"""One tool-call round trip against a real chat-completions endpoint (opt-in).

Run with ``PRISM_LIVE_OBSERVATIONAL_MEMORY_TESTS=1``, ``PRISM_LIVE_BASE_URL`` (for
example ``http://127.0.0.1:11434/v1`` for Ollama) and ``PRISM_LIVE_MODEL``; set
``PRISM_LIVE_API_KEY`` when the endpoint needs a key.
"""

from __future__ import annotations

import json
import os

import pytest

from prism_om.providers import (
    ProviderEvent,
    ProviderMessage,
    ProviderRequest,
    ToolCallEvent,
    ToolDefinition,
    event_stream,
)

pytest.importorskip("httpx", reason="the live provider test needs the 'openai' extra (httpx)")

from prism_om.providers.openai_compat import OpenAICompatibleProvider


def _live_settings() -> tuple[str, str] | None:
    if os.environ.get("PRISM_LIVE_OBSERVATIONAL_MEMORY_TESTS") != "1":
        return None
    base_url = os.environ.get("PRISM_LIVE_BASE_URL")
    model = os.environ.get("PRISM_LIVE_MODEL")
    if not base_url or not model:
        return None
    return base_url, model


pytestmark = pytest.mark.skipif(
    _live_settings() is None,
    reason="live test: set PRISM_LIVE_OBSERVATIONAL_MEMORY_TESTS=1, PRISM_LIVE_BASE_URL "
    "and PRISM_LIVE_MODEL (optional PRISM_LIVE_API_KEY)",
)

RECORD = ToolDefinition(
    name="record_observations",
    description="Record short factual observations about the conversation.",
    parameters={
        "type": "object",
        "properties": {
            "observations": {
                "type": "array",
                "items": {"type": "string"},
                "description": "One short sentence per observation.",
            }
        },
        "required": ["observations"],
    },
)


async def _events(
    provider: OpenAICompatibleProvider, request: ProviderRequest
) -> list[ProviderEvent]:
    async with event_stream(provider, request) as stream:
        return [event async for event in stream]


async def test_live_tool_call_round_trip() -> None:
    settings = _live_settings()
    assert settings is not None
    base_url, model = settings
    key = os.environ.get("PRISM_LIVE_API_KEY") or None

    async def resolve(provider_id: str) -> str | None:
        return key

    system = (
        "You are a memory observer. Always answer by calling record_observations exactly "
        "once with the facts you observe. Do not answer in text."
    )
    transcript = [
        ProviderMessage("user", "My name is Ada and I am allergic to peanuts."),
    ]
    async with OpenAICompatibleProvider(
        base_url, model, credential_resolver=resolve, timeout=120.0
    ) as provider:
        first = await _events(
            provider,
            ProviderRequest(
                system=system,
                messages=transcript,
                tools=[RECORD],
                correlation_id="om:live-test",
                options={"tool_choice": "required"},
            ),
        )
        calls = [e for e in first if isinstance(e, ToolCallEvent)]
        assert calls, f"the model made no tool call: {first!r}"
        assert calls[0].name == "record_observations"
        arguments = json.loads(calls[0].arguments)
        assert isinstance(arguments.get("observations"), list)

        # Replay the calls with their results: a pairing-checking endpoint must accept it.
        transcript.append(ProviderMessage("assistant", "", tool_calls=[c.to_call() for c in calls]))
        transcript.extend(
            ProviderMessage("tool", json.dumps({"recorded": True}), tool_call_id=c.id)
            for c in calls
        )
        transcript.append(ProviderMessage("user", "Thanks. Reply with the single word: done."))
        second = await _events(
            provider, ProviderRequest(system=system, messages=transcript, tools=[RECORD])
        )
        assert second[-1].type == "done"
