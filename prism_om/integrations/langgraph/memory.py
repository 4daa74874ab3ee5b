"""``PrismGraphMemory``: a LangGraph graph's messages in a prism-om session, and the
model's input rebuilt from memory + the request window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from ...attach import ObservationalMemory
from ...errors import InvalidInputError
from ...providers.base import CredentialResolver, Provider
from ...stores import SessionStore
from ...workers.model import Model
from ..conversation import StoredConversation
from .messages import RECORD_TYPE, ROOT_TYPE, key_of, message_of, record_of, without_results

__all__ = ["PrismGraphMemory"]


class PrismGraphMemory(StoredConversation):
    """Memory for a LangGraph agent: one prism-om session per conversation (thread).

    ``await memory.model_input(state["messages"])`` appends the messages the session does
    not hold yet (each LangChain message once, by its id), runs the observe / reflect /
    drop pipeline, and returns what the model should be given: a ``SystemMessage`` with the
    rendered memory, then the window (every message the observer has not covered and at
    least the last ``context.recent_messages``, reaching back to the ``AIMessage`` of every
    ``ToolMessage`` in it), never the whole list. ``pre_model_hook`` is that as the node
    ``create_react_agent(pre_model_hook=...)`` documents: it returns only
    ``{"llm_input_messages": [...]}``, so the graph's state and checkpointer keep the
    messages as they are. Without memory (or with a passive one) the messages are stored
    and handed back unchanged. Revoked messages (the memory's ``invalidated_ids``) read
    as ``[revoked] <entry id>``, their tool call ids kept.
    """

    def __init__(
        self,
        session_id: str,
        store: SessionStore | str,
        *,
        memory: ObservationalMemory | None = None,
        session_model: Model | str | Mapping[str, Any] | None = None,
        credential_resolver: CredentialResolver | None = None,
        providers: Mapping[str, Provider] | None = None,
    ) -> None:
        super().__init__(
            session_id,
            store,
            record_type=RECORD_TYPE,
            root_type=ROOT_TYPE,
            memory=memory,
            session_model=session_model,
            credential_resolver=credential_resolver,
            providers=providers,
        )

    async def add_messages(self, messages: Sequence[BaseMessage]) -> int:
        """Append the messages the session does not hold yet (the newest ones: the list
        is read back from its end to the first message already stored); returns how many."""
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
            raise InvalidInputError(
                f"messages must be a list of LangChain messages, got {type(messages).__name__}"
            )
        keys = [key_of(m, i) for i, m in enumerate(messages)]
        start = len(messages)
        while start > 0 and not await self.known(keys[start - 1]):
            start -= 1
        fresh = [record_of(m, start + i) for i, m in enumerate(messages[start:])]
        await self.append(fresh)
        return len(fresh)

    async def messages(self) -> list[BaseMessage]:
        """Every message of the session's branch, as given (revoked ones withheld)."""
        return [message_of(r) for r in await self.records()]

    async def model_input(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Store the new ``messages``, then the model's input: memory + the window."""
        await self.add_messages(messages)
        if not self.memory_view:
            return list(messages)
        view = await self.view()
        window = without_results([message_of(r) for r in view.records], view.unanswered)
        shown = {m.id for m in window if m.id}
        # The graph's own system messages stay, wherever the window starts.
        system = [m for m in messages if isinstance(m, SystemMessage) and m.id not in shown]
        head = [SystemMessage(content=view.memory)] if view.memory else []
        return [*system, *head, *window]

    async def pre_model_hook(self, state: Any) -> dict[str, Any]:
        """The ``pre_model_hook`` node: ``{"llm_input_messages": model_input(messages)}``."""
        return {"llm_input_messages": await self.model_input(_messages_of(state))}

    async def post_model_hook(self, state: Any) -> dict[str, Any]:
        """The ``post_model_hook`` node: stores the model's reply (and runs the memory
        pipeline) as soon as it is in the state; changes no state."""
        await self.add_messages(_messages_of(state))
        return {}


def _messages_of(state: Any) -> Sequence[BaseMessage]:
    messages = state.get("messages") if isinstance(state, Mapping) else None
    if messages is None:
        messages = getattr(state, "messages", None)
    if messages is None:
        raise InvalidInputError("the graph state has no 'messages' for the memory hook")
    return messages  # type: ignore[no-any-return]
