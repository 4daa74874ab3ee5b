"""Tools an agent can call: a definition the model sees and an async handler."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import PrismMemoryError
from ..providers.base import ToolDefinition

__all__ = ["AgentTool", "ToolHandler", "run_tool"]


class ToolHandler(Protocol):
    """``async handler(args, *, session_id)``: the calling session's id comes with each call."""

    def __call__(self, args: dict[str, Any], *, session_id: str) -> Awaitable[Any]: ...


@dataclass(frozen=True)
class AgentTool:
    """A registered tool: what the model is told, and what runs when it is called."""

    definition: ToolDefinition
    handler: ToolHandler

    @property
    def name(self) -> str:
        return self.definition.name

    @classmethod
    def of(
        cls,
        name: str,
        handler: ToolHandler | Callable[..., Awaitable[Any]],
        *,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
    ) -> AgentTool:
        schema = dict(parameters or {"type": "object", "properties": {}})
        return cls(ToolDefinition(name, description, schema), handler)


async def run_tool(
    tools: Mapping[str, AgentTool], name: str, raw_arguments: str, session_id: str
) -> tuple[str, bool]:
    """Run one tool call; returns its JSON result text and whether it failed.

    A failing tool becomes an error result the model reads, never an exception that ends
    the user's run: the model can correct a bad call on its next turn.
    """
    tool = tools.get(name)
    if tool is None:
        return json.dumps({"error": f"unknown tool {name!r}"}), True
    try:
        args = json.loads(raw_arguments or "{}")
        if not isinstance(args, dict):
            raise ValueError("tool arguments must be a JSON object")
        result = await tool.handler(args, session_id=session_id)
        return json.dumps(result, ensure_ascii=False, default=str), False
    except (PrismMemoryError, ValueError, TypeError, KeyError) as exc:
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"}), True
    except RecursionError:  # arguments nested past the JSON parser's own limit
        return json.dumps({"error": "InvalidInputError: arguments nest too deeply"}), True
