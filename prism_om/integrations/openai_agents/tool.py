"""``recall_tool(session)``: the exact-recall ``recall`` tool as an Agents SDK ``FunctionTool``."""

from __future__ import annotations

import json
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from ...core.redaction import redact_error, redactor
from ...errors import PrismMemoryError
from ...observational_memory.recall_tool import RECALL_TOOL_NAME, create_recall_memory_tool
from .session import PrismSession

__all__ = ["recall_tool"]


def _definition_parameters() -> tuple[str, dict[str, Any]]:
    # The definition is static; a tool over an empty branch gives it without a store.
    definition = create_recall_memory_tool(get_entries=lambda _session_id: []).definition
    return definition.description, dict(definition.parameters)


def recall_tool(session: PrismSession) -> FunctionTool:
    """The ``recall`` tool over ``session``: an observation or reflection by id with its
    sources, or a page of raw messages around a cursor entry id.

    Arguments are those of ``prism_om.observational_memory.recall_tool``. The result is
    JSON text; a refused call (a bad id, a page over 100, a cursor off the branch, ...)
    answers ``{"error": <type>, "message": ...}`` (the memory's secrets redacted from the
    message, as from every answer) so the model can correct itself, and an
    unknown or revoked id answers ``{"found": false, "reason": ...}``.
    """
    if not isinstance(session, PrismSession):
        from ...errors import InvalidInputError

        raise InvalidInputError(f"recall_tool() takes a PrismSession, got {type(session).__name__}")
    description, parameters = _definition_parameters()
    secrets = redactor(session.memory.secrets if session.memory is not None else None)

    async def invoke(_context: ToolContext[Any], arguments: str) -> str:
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return _error("InvalidInputError", f"arguments are not JSON: {exc}")
        except RecursionError:
            # The parser's own limit: recall's arguments are flat, none nests at all.
            return _error("InvalidInputError", "arguments nest too deeply to be parsed")
        try:
            tool = await session.recall_memory_tool()
            result = await tool.handler(args, session_id=session.session_id)
        except PrismMemoryError as exc:
            # The model reads the message: the memory's secrets are redacted from it, as
            # from every answer (a message may quote the cursor or the session id).
            return _error(type(exc).__name__, str(redact_error(exc, secrets)))
        return json.dumps(result, ensure_ascii=False)

    return FunctionTool(
        name=RECALL_TOOL_NAME,
        description=description,
        params_json_schema=parameters,
        on_invoke_tool=invoke,
        # Every argument is optional (an id, or a cursor with options): not strict-mode.
        strict_json_schema=False,
    )


def _error(kind: str, message: str) -> str:
    return json.dumps({"error": kind, "message": message}, ensure_ascii=False)
