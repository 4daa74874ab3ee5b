"""Just enough of an agent host to run observational memory end to end."""

from __future__ import annotations

from .agent import Agent, CompactionRequest, CompactionRequestHook, CompactionStrategy
from .context import ContextProvider, HostBlock, history_since_compaction
from .tools import AgentTool

__all__ = [
    "Agent",
    "AgentTool",
    "CompactionRequest",
    "CompactionRequestHook",
    "CompactionStrategy",
    "ContextProvider",
    "HostBlock",
    "history_since_compaction",
]
