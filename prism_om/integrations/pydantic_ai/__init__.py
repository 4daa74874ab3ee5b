"""The PydanticAI integration (``pip install 'prism-om[pydantic-ai]'``).

* ``PrismHistory``: the conversation in a prism-om session; ``history.capability()`` (a
  ``ProcessHistory`` over ``history.process``) hands the model the memory + the request
  window before each model request; ``await history.messages()`` reloads the stored
  ``message_history`` (a ``ModelMessagesTypeAdapter`` round trip);
* ``recall_tool(history)``: the ``recall`` tool as a PydanticAI ``Tool``.

How messages and tool calls are stored: ``prism_om.integrations.pydantic_ai.messages``
(and docs/integrations-pydantic-ai.md)::

    history = PrismHistory("chat-1", "sqlite:agent.db", memory=create_observational_memory(...))
    agent = Agent(model, capabilities=[history.capability()], tools=[recall_tool(history)])
"""

from __future__ import annotations

from ..._extras import install_hint

try:
    import pydantic_ai as _pydantic_ai  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "prism_om.integrations.pydantic_ai needs PydanticAI: " + install_hint("pydantic-ai")
    ) from exc

from .history import PrismHistory, PrismMemoryCapability
from .messages import MEMORY_MARKER, RECORD_TYPE, ROOT_TYPE
from .tool import recall_tool

__all__ = [
    "MEMORY_MARKER",
    "RECORD_TYPE",
    "ROOT_TYPE",
    "PrismHistory",
    "PrismMemoryCapability",
    "recall_tool",
]
