"""Model providers: the ``Provider`` protocol, its request and events, a scripted double.

The OpenAI-compatible provider lives in ``prism_om.providers.openai_compat`` and is not
imported here, so that ``import prism_om`` never needs ``httpx`` (the ``openai`` extra).
"""

from __future__ import annotations

from .base import (
    MAX_PROVIDER_ERROR_BYTES,
    CredentialResolver,
    DoneEvent,
    Provider,
    ProviderError,
    ProviderEvent,
    ProviderMessage,
    ProviderRequest,
    ProviderRole,
    ProviderToolCall,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolDefinition,
    bound_error_text,
    event_stream,
    sanitize_cache_key,
)
from .scripted import ScriptedProvider, ScriptExhaustedError

__all__ = [
    "MAX_PROVIDER_ERROR_BYTES",
    "CredentialResolver",
    "DoneEvent",
    "Provider",
    "ProviderError",
    "ProviderEvent",
    "ProviderMessage",
    "ProviderRequest",
    "ProviderRole",
    "ProviderToolCall",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "TextEvent",
    "ThinkingEvent",
    "ToolCallEvent",
    "ToolDefinition",
    "bound_error_text",
    "event_stream",
    "sanitize_cache_key",
]
