"""The ``recall`` tool's definition and one call of it, as JSON text (no framework import).

The LangGraph and PydanticAI integrations wrap this in their framework's tool type, as the
Agents SDK integration does: a refused call answers ``{"error": <type>, "message": ...}``
(the memory's secrets redacted) so the model can correct itself, and an unknown or revoked
id answers ``{"found": false, "reason": ...}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.redaction import redact_error, redactor
from ..errors import PrismMemoryError
from ..observational_memory.recall_tool import RECALL_TOOL_NAME, create_recall_memory_tool
from .conversation import StoredConversation

__all__ = ["RECALL_TOOL_NAME", "recall_definition", "recall_json"]


def recall_definition() -> tuple[str, dict[str, Any]]:
    """The tool's description and JSON schema (static: a tool over no branch gives it)."""
    definition = create_recall_memory_tool(get_entries=lambda _session_id: []).definition
    return definition.description, dict(definition.parameters)


async def recall_json(conversation: StoredConversation, arguments: Mapping[str, Any]) -> str:
    """One call of ``recall`` over ``conversation``'s session, answered as JSON text."""
    secrets = redactor(conversation.memory.secrets if conversation.memory is not None else None)
    # Models often send optional keys as null: recall counts those as absent.
    args = dict(arguments)
    try:
        tool = await conversation.recall_memory_tool()
        result = await tool.handler(args, session_id=conversation.session_id)
    except PrismMemoryError as exc:
        # The model reads the message: the memory's secrets are redacted from it, as from
        # every answer (a message may quote the cursor or the session id).
        message = str(redact_error(exc, secrets))
        return json.dumps({"error": type(exc).__name__, "message": message}, ensure_ascii=False)
    return json.dumps(result, ensure_ascii=False)
