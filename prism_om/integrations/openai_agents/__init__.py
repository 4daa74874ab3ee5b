"""The OpenAI Agents SDK integration (``pip install 'prism-om[agents]'``).

``PrismSession`` implements the SDK's ``agents.memory.Session`` protocol over any
prism-om store, with observational memory when given one; ``recall_tool(session)`` is
the exact-recall tool as an SDK ``FunctionTool``::

    session = PrismSession("chat-1", "sqlite:agent.db", memory=create_observational_memory(...))
    agent = Agent(name="helper", tools=[recall_tool(session)])
    await Runner.run(agent, "What did we decide?", session=session)
"""

from __future__ import annotations

try:
    import agents as _agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "prism_om.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'prism-om[agents]' (from a clone: pip install '.[agents]')"
    ) from exc

from .items import ITEM_TYPE, ROOT_TYPE
from .session import PrismSession
from .tool import recall_tool

__all__ = ["ITEM_TYPE", "ROOT_TYPE", "PrismSession", "recall_tool"]
