"""``recall_tool(memory)``: the exact-recall ``recall`` tool as a LangChain tool."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool

from ...errors import InvalidInputError
from ..conversation import StoredConversation
from ..recall import RECALL_TOOL_NAME, recall_definition, recall_json
from .history import PrismChatMessageHistory

__all__ = ["recall_tool"]


def recall_tool(memory: StoredConversation | PrismChatMessageHistory) -> StructuredTool:
    """The ``recall`` tool over ``memory``'s session (a ``PrismGraphMemory`` or a
    ``PrismChatMessageHistory``): an observation or reflection by id with its sources, or a
    page of raw messages around a cursor entry id. Async only (``ainvoke``, ``ToolNode``
    in an async graph). The answer is JSON text; a refused call answers
    ``{"error": <type>, "message": ...}`` so the model can correct itself."""
    if isinstance(memory, PrismChatMessageHistory):
        memory = memory.conversation
    if not isinstance(memory, StoredConversation):
        raise InvalidInputError(
            f"recall_tool() takes a PrismGraphMemory or PrismChatMessageHistory, "
            f"got {type(memory).__name__}"
        )
    description, parameters = recall_definition()

    conversation = memory

    async def recall(**arguments: Any) -> str:
        return await recall_json(conversation, arguments)

    return StructuredTool.from_function(
        coroutine=recall,
        name=RECALL_TOOL_NAME,
        description=description,
        args_schema=parameters,
    )
