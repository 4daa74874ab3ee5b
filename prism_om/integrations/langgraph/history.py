"""``PrismChatMessageHistory``: a LangChain ``BaseChatMessageHistory`` over a prism-om session."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, SystemMessage

from ...attach import ObservationalMemory
from ...errors import InvalidInputError
from ...providers.base import CredentialResolver, Provider
from ...stores import SessionStore
from ...workers.model import Model
from ..conversation import StoredConversation
from .messages import RECORD_TYPE, ROOT_TYPE, message_of, record_of, without_results

__all__ = ["PrismChatMessageHistory"]

_ASYNC_ONLY = (
    "PrismChatMessageHistory is async (its store is): use aget_messages / aadd_messages / "
    "aclear, or RunnableWithMessageHistory's ainvoke / astream"
)


class PrismChatMessageHistory(BaseChatMessageHistory):
    """Chat history for ``RunnableWithMessageHistory``, kept in a prism-om session.

    ``aadd_messages`` appends each message as given (stored as the LangGraph memory stores
    it: ``prism_om.integrations.langgraph.messages``) and runs the memory pipeline when
    ``memory`` is set. ``aget_messages`` is what the chain's prompt should hold: with
    memory, a ``SystemMessage`` with the rendered memory then the request window (every
    message the observer has not covered, at least the last ``context.recent_messages``,
    each ``ToolMessage`` with its call); without memory, every message.
    ``aget_all_messages`` is always every message. ``aclear`` moves the session back to
    its start (nothing is deleted). The store is async, so the sync methods raise
    ``InvalidInputError`` naming the async ones.
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
        self.conversation = StoredConversation(
            session_id,
            store,
            record_type=RECORD_TYPE,
            root_type=ROOT_TYPE,
            memory=memory,
            session_model=session_model,
            credential_resolver=credential_resolver,
            providers=providers,
        )

    def __repr__(self) -> str:
        return f"PrismChatMessageHistory({self.conversation.session_id!r})"

    __str__ = __repr__

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        raise InvalidInputError(_ASYNC_ONLY)

    def add_messages(self, messages: Sequence[BaseMessage]) -> NoReturn:
        raise InvalidInputError(_ASYNC_ONLY)

    def clear(self) -> NoReturn:
        raise InvalidInputError(_ASYNC_ONLY)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages as one batch (all stored, or none), then run memory work."""
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
            raise InvalidInputError(
                f"messages must be a list of LangChain messages, got {type(messages).__name__}"
            )
        records = [record_of(m, i, keyed=False) for i, m in enumerate(messages)]
        await self.conversation.append(records)

    async def aget_messages(self) -> list[BaseMessage]:
        """The prompt's history: memory + the window with memory, else every message."""
        view = await self.conversation.view()
        window = without_results([message_of(r) for r in view.records], view.unanswered)
        head = [SystemMessage(content=view.memory)] if view.memory else []
        return [*head, *window]

    async def aget_all_messages(self) -> list[BaseMessage]:
        """Every message of the session's branch, as given (revoked ones withheld)."""
        return [message_of(r) for r in await self.conversation.records()]

    async def aclear(self) -> None:
        await self.conversation.clear()

    async def close(self) -> None:
        """Wait for background memory work; close the store if this history opened it."""
        await self.conversation.close()
