"""``PrismHistory``: a PydanticAI agent's message history in a prism-om session, and the
history processor that hands the model memory + the request window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, SystemPromptPart
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import RunContext

from ...attach import ObservationalMemory
from ...errors import InvalidInputError
from ...providers.base import CredentialResolver, Provider
from ...stores import SessionStore
from ...workers.model import Model
from ..conversation import StoredConversation
from .messages import (
    RECORD_TYPE,
    ROOT_TYPE,
    is_memory,
    key_of,
    memory_message,
    message_of,
    record_of,
    without_results,
)

__all__ = ["PrismHistory", "PrismMemoryCapability"]


class PrismHistory(StoredConversation):
    """A PydanticAI conversation kept in one prism-om session.

    ``capabilities=[history.capability()]`` is the whole integration: before each model
    request its history processor (``process``, the function ``ProcessHistory`` runs)
    appends the messages the session does not hold yet (each once, by a digest of its
    JSON), runs the observe / reflect / drop pipeline and hands the model the memory
    (one ``ModelRequest`` with the agent's system prompts and the memory as a
    ``CompactionPart``) followed by the request window: every message the observer has
    not covered and at least the last ``context.recent_messages``, reaching back to the
    call of every tool return in it; after the run it stores the final response.
    ``ProcessHistory(history.process)`` alone works too (then ``add_messages(
    result.all_messages())`` after the run stores the last response).

    ``await history.messages()`` gives back every stored message (a
    ``ModelMessagesTypeAdapter`` round trip), to pass as ``message_history=`` (the
    processor trims it) or to show; without memory (or with a passive one) the processor
    hands the messages back unchanged. Revoked messages (the memory's ``invalidated_ids``)
    read as ``[revoked] <entry id>``, their tool call ids kept.
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

    async def add_messages(self, messages: Sequence[ModelMessage]) -> int:
        """Append the messages the session does not hold yet (the newest ones: the list
        is read back from its end to the first message already stored; the memory
        message is never stored); returns how many."""
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
            raise InvalidInputError(
                f"messages must be a list of PydanticAI messages, got {type(messages).__name__}"
            )
        fresh = []
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if is_memory(message):
                continue
            if await self.known(key_of(message, index)):
                break
            fresh.append(record_of(message, index))
        fresh.reverse()
        await self.append(fresh)
        return len(fresh)

    async def messages(self) -> list[ModelMessage]:
        """Every message of the session's branch, as given (revoked ones withheld)."""
        return [message_of(r) for r in await self.records()]

    async def process(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history processor: store the new messages, then memory + the window."""
        await self.add_messages(messages)
        if not self.memory_view:
            return list(messages)
        view = await self.view()
        window = without_results([message_of(r) for r in view.records], view.unanswered)
        if not view.memory:
            return window
        in_window = [p for m in window for p in m.parts if isinstance(p, SystemPromptPart)]
        system: list[SystemPromptPart] = []
        for message in messages:
            for part in message.parts:
                # The agent's system prompts sit in the conversation's first request: kept
                # when the window starts after it.
                if isinstance(part, SystemPromptPart) and part not in in_window + system:
                    system.append(part)
        return [memory_message(view.memory, system), *window]

    def capability(self) -> PrismMemoryCapability:
        """The capability to give the agent: ``Agent(..., capabilities=[history.capability()])``."""
        return PrismMemoryCapability(self.process, history=self)


@dataclass
class PrismMemoryCapability(ProcessHistory[Any]):
    """``ProcessHistory(history.process)`` that also stores the run's last response."""

    history: PrismHistory | None = None

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        if self.history is not None:
            await self.history.add_messages(result.all_messages())
        return result
