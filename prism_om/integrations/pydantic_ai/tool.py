"""``recall_tool(history)``: the exact-recall ``recall`` tool as a PydanticAI ``Tool``."""

from __future__ import annotations

from typing import Any

from pydantic_ai.tools import Tool

from ...errors import InvalidInputError
from ..recall import RECALL_TOOL_NAME, recall_definition, recall_json
from .history import PrismHistory

__all__ = ["recall_tool"]


def recall_tool(history: PrismHistory) -> Tool[Any]:
    """The ``recall`` tool over ``history``'s session: an observation or reflection by id
    with its sources, or a page of raw messages around a cursor entry id
    (``Agent(..., tools=[recall_tool(history)])``). The answer is JSON text; a refused call
    answers ``{"error": <type>, "message": ...}`` so the model can correct itself."""
    if not isinstance(history, PrismHistory):
        raise InvalidInputError(f"recall_tool() takes a PrismHistory, got {type(history).__name__}")
    description, parameters = recall_definition()

    async def recall(**arguments: Any) -> str:
        return await recall_json(history, arguments)

    return Tool.from_schema(recall, RECALL_TOOL_NAME, description, parameters)
