"""The LangGraph / LangChain integration (``pip install 'prism-om[langgraph]'``).

* ``PrismGraphMemory``: memory for a prebuilt ReAct agent (``pre_model_hook``) or any
  graph (``await memory.model_input(state["messages"])`` in the node that calls the
  model): the model gets the memory + the request window, the graph's state and
  checkpointer keep their messages;
* ``recall_tool(memory)``: the ``recall`` tool as a LangChain tool;
* ``PrismChatMessageHistory``: a ``BaseChatMessageHistory`` for
  ``RunnableWithMessageHistory``.

How messages and tool calls are stored: ``prism_om.integrations.langgraph.messages``
(and docs/integrations-langgraph.md)::

    memory = PrismGraphMemory("t-1", "sqlite:agent.db", memory=create_observational_memory(...))
    agent = create_react_agent(model, [recall_tool(memory)], pre_model_hook=memory.pre_model_hook)
"""

from __future__ import annotations

from ..._extras import install_hint

try:
    import langchain_core as _langchain_core  # noqa: F401
    import langgraph as _langgraph  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "prism_om.integrations.langgraph needs LangGraph and LangChain Core: "
        + install_hint("langgraph")
    ) from exc

from .history import PrismChatMessageHistory
from .memory import PrismGraphMemory
from .messages import RECORD_TYPE, ROOT_TYPE
from .tool import recall_tool

__all__ = ["RECORD_TYPE", "ROOT_TYPE", "PrismChatMessageHistory", "PrismGraphMemory", "recall_tool"]
