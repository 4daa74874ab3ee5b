"""A small agent loop: enough of a host to run observational memory end to end.

``run`` appends the user message, asks the provider with the context blocks of every
registered context provider plus the branch messages, executes registered tools, and
appends the assistant (and tool) messages. ``compact`` appends one compaction entry made
by a strategy, after every ``compaction_request`` hook had its say.

Extension points, each a list a host (or ``attach()``) registers on: ``context_providers``
(blocks for each request), ``compaction_hooks`` (rewrite what a compaction folds) and
``turn_hooks``: each call of ``run`` / ``prompt`` / ``stream`` / ``compact`` /
``wrap_resume_run`` / ``wrap_resume_stream`` runs inside every turn hook's ``turn()``
scope, which sees the call start and, once it ended (a stream closed early included),
does its after-turn work. A call made from inside another (a resume that runs a turn) is
one turn: only the outermost call enters the hooks.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..core.withheld import InvalidationSource, check_invalidation_source, resolve_invalidation
from ..debug import PROVIDER_TEXT_SANITIZED, DebugEmitter, DebugSink
from ..entries import SessionEntry, ToolCall, find_too_deep, message_entry, sanitize_surrogates
from ..entries import sanitize_surrogates_value as _sanitize_value
from ..errors import InvalidInputError
from ..providers.base import (
    Provider,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ToolCallEvent,
    event_stream,
)
from ..session import Session
from .context import (
    RECENT_MESSAGES_BLOCK,
    ContextProvider,
    HostBlock,
    load_history_since_compaction,
    render_system,
    to_provider_messages,
)
from .tools import AgentTool, run_tool

__all__ = [
    "Agent",
    "CompactionRequest",
    "CompactionRequestHook",
    "CompactionStrategy",
    "TurnHook",
    "TurnKind",
    "TurnRecord",
]

DEFAULT_MAX_TOOL_ROUNDS = 8


class CompactionStrategy(Protocol):
    """Makes one compaction entry from the branch it is given (root first)."""

    def compact(
        self, entries: Sequence[SessionEntry], *, session_id: str, trigger: str = "manual"
    ) -> SessionEntry: ...


@dataclass(frozen=True)
class CompactionRequest:
    """What a strategy is about to fold; a ``compaction_request`` hook may rewrite it."""

    session_id: str
    entries: tuple[SessionEntry, ...]
    trigger: str


CompactionRequestHook = Callable[[CompactionRequest], Awaitable[CompactionRequest]]


@dataclass(frozen=True)
class TurnRecord:
    """What one turn sent and stored: memory's post-run work reads it instead of the store.

    ``request`` is the last request the turn sent the provider (its system text holds the
    context blocks); ``entries`` every entry the turn appended, in order, as stored.
    """

    request: ProviderRequest
    entries: tuple[SessionEntry, ...]
    sent: int = 0
    """How many of ``entries`` ``request`` carries (the rest came after it: the reply)."""


TurnKind = Literal["run", "compact", "resume"]
"""What a hooked call does: a turn (``run``/``prompt``/``stream``), a ``compact``, or a
host's ``resume`` of an interrupted run."""


class TurnHook(Protocol):
    """Work around each call of an agent (``Agent.turn_hooks``)."""

    def turn(self, agent: Agent, kind: TurnKind) -> AbstractAsyncContextManager[object]:
        """A scope entered before the call and left after it; leaving without an
        exception (a stream closed early included) is the call having ended."""
        ...


@dataclass
class Agent:
    """One session's agent: a provider, a system text, tools and context providers."""

    session: Session
    provider: Provider
    model: str | None = None
    system: str = ""
    tools: Sequence[AgentTool] = ()
    context_providers: list[ContextProvider] = field(default_factory=list)
    compaction_strategy: CompactionStrategy | None = None
    compaction_hooks: list[CompactionRequestHook] = field(default_factory=list)
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS
    provider_options: dict[str, Any] = field(default_factory=dict)
    debug: DebugSink | None = None
    """Receives ``prism:provider-text-sanitized`` when a reply held lone surrogates."""
    invalidated_ids: InvalidationSource = None
    """Revoked ids (a set, or a callable asked every turn) the replayed history withholds;
    ``attach`` sets the memory's own."""
    turn_hooks: list[TurnHook] = field(default_factory=list)
    """Hooks around every call (see the module docstring); ``attach`` registers memory's."""
    last_turn: TurnRecord | None = field(default=None, init=False, repr=False)
    """The latest turn's request and appended entries (None before the first turn)."""
    last_compacted: SessionEntry | None = field(default=None, init=False, repr=False)
    """The compaction entry the latest ``compact`` appended."""
    _depth: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.invalidated_ids = check_invalidation_source(self.invalidated_ids)
        self._tools = {t.name: t for t in self.tools}
        if len(self._tools) != len(self.tools):
            raise InvalidInputError("two tools share one name")

    def register_tool(self, tool: AgentTool) -> None:
        if tool.name in self._tools:
            raise InvalidInputError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    # -- turns ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def hooked(self, kind: TurnKind) -> AsyncIterator[None]:
        """Run the body as one call of the agent, inside every turn hook's scope (only the
        outermost call when calls nest)."""
        if self._depth or not self.turn_hooks:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        async with contextlib.AsyncExitStack() as scopes:
            for hook in list(self.turn_hooks):
                await scopes.enter_async_context(hook.turn(self, kind))
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1

    async def run(self, prompt: str) -> SessionEntry:
        """One user turn to completion; returns the final assistant entry."""
        async with self.hooked("run"):
            final: SessionEntry | None = None
            async for _event, entry in self._turn(prompt):
                if entry is not None and entry.role == "assistant":
                    final = entry
            assert final is not None  # every turn ends with an assistant entry
            return final

    async def prompt(self, text: str) -> str:
        """One user turn; returns the assistant's final text."""
        entry = await self.run(text)
        return entry.message.text() if entry.message is not None else ""

    async def stream(self, prompt: str) -> AsyncIterator[ProviderEvent]:
        """One user turn, yielding provider events as they arrive.

        A consumer that breaks out of the loop should close the stream (``await
        stream.aclose()`` or ``contextlib.aclosing``): the turn then ends at once, and the
        turn hooks' after-turn work runs as it does when the stream completes.
        """
        async with self.hooked("run"):
            turn = self._turn(prompt)
            try:
                async for event, _entry in turn:
                    if event is not None:
                        yield event
            finally:
                # The turn ends now, not when the generator is garbage-collected.
                await turn.aclose()

    async def wrap_resume_run(self, resume: Callable[[], Awaitable[Any]]) -> Any:
        """Run a host's resume of an interrupted run as one call (turn hooks around it)."""
        async with self.hooked("resume"):
            return await resume()

    async def wrap_resume_stream(
        self, resume: Callable[[], AsyncIterator[ProviderEvent]]
    ) -> AsyncIterator[ProviderEvent]:
        """Stream a host's resume of an interrupted run as one call (see ``stream``)."""
        async with self.hooked("resume"):
            events = resume()
            try:
                async for event in events:
                    yield event
            finally:
                close = getattr(events, "aclose", None)
                if close is not None:
                    await close()

    async def _turn(
        self, prompt: str
    ) -> AsyncGenerator[tuple[ProviderEvent | None, SessionEntry | None], None]:
        if not isinstance(prompt, str) or not prompt.strip():
            raise InvalidInputError("a prompt must be non-empty text")
        # Blocks describe the conversation before this turn; the turn itself follows them
        # as real messages, so nothing is sent twice.
        blocks = await self._blocks()
        history: list[SessionEntry] = []
        if not any(b.name == RECENT_MESSAGES_BLOCK for b in blocks):
            history = await self._history()
        turn = [await self.session.append_message("user", prompt)]
        yield None, turn[0]
        system = render_system(self.system, blocks)
        for _round in range(self.max_tool_rounds + 1):
            request = ProviderRequest(
                system=system,
                messages=to_provider_messages([*history, *turn]),
                tools=[t.definition for t in self._tools.values()],
                model=self.model,
                options=dict(self.provider_options),
            )
            sent = len(turn)
            self.last_turn = TurnRecord(request, tuple(turn), sent)
            text: list[str] = []
            calls: list[ToolCallEvent] = []
            async with event_stream(self.provider, request) as events:
                async for event in events:
                    if isinstance(event, TextEvent):
                        text.append(event.text)
                    elif isinstance(event, ToolCallEvent):
                        calls.append(event)
                    yield event, None
            # Tools run only while rounds remain; the last round's calls are not executed.
            runnable = calls if _round < self.max_tool_rounds else []
            # Provider text may end in half a surrogate pair; stored as is it would be
            # refused, and the reply lost.
            reply, replaced = sanitize_surrogates("".join(text))
            built = [_tool_call(c) for c in runnable]
            replaced += sum(count for _, count in built)
            assistant = await self.session.append_message(
                "assistant", reply, tool_calls=[c for c, _ in built] or None
            )
            self._report_sanitized(assistant, replaced)
            turn.append(assistant)
            self.last_turn = TurnRecord(request, tuple(turn), sent)
            yield None, assistant
            if not runnable:
                return
            for call, (stored, _) in zip(runnable, built, strict=True):
                result, _failed = await run_tool(
                    self._tools, call.name, call.arguments, self.session.id
                )
                result, replaced = sanitize_surrogates(result)
                tool_entry = await self.session.append_message(
                    "tool", result, tool_call_id=stored.id
                )
                self._report_sanitized(tool_entry, replaced)
                turn.append(tool_entry)
                self.last_turn = TurnRecord(request, tuple(turn), sent)
                yield None, tool_entry

    def _report_sanitized(self, entry: SessionEntry, replaced: int) -> None:
        if replaced and self.debug is not None:
            self._emit_debug(
                PROVIDER_TEXT_SANITIZED,
                {"entryId": entry.id, "role": entry.role, "replacedCharacters": replaced},
            )

    def _emit_debug(self, event: str, data: dict[str, Any]) -> None:
        DebugEmitter(self.debug, trace=True)(event, data)

    async def _blocks(self) -> list[HostBlock]:
        blocks: list[HostBlock] = []
        for provider in self.context_providers:
            blocks.extend(await provider.blocks(self.session))
        return blocks

    async def _history(self) -> list[SessionEntry]:
        invalid = await resolve_invalidation(self.invalidated_ids)
        return await load_history_since_compaction(self.session, invalid)

    async def request_preview(self, prompt: str | None = "…") -> ProviderRequest:
        """The request the next turn would send for ``prompt``, without appending anything.

        ``prompt=None`` leaves the coming prompt out: what the request carries before it.
        """
        blocks = await self._blocks()
        history: list[SessionEntry] = []
        if not any(b.name == RECENT_MESSAGES_BLOCK for b in blocks):
            history = await self._history()
        if prompt is not None:
            history.append(message_entry(self.session.id, "user", prompt, parent_id="preview"))
        return ProviderRequest(
            system=render_system(self.system, blocks),
            messages=to_provider_messages(history),
            tools=[t.definition for t in self._tools.values()],
            model=self.model,
        )

    # -- compaction ---------------------------------------------------------------------

    async def compact(
        self, strategy: CompactionStrategy | None = None, *, trigger: str = "manual"
    ) -> SessionEntry:
        """Append one compaction entry made by ``strategy`` (default: the agent's)."""
        async with self.hooked("compact"):
            return await self._compact(strategy, trigger)

    async def _compact(self, strategy: CompactionStrategy | None, trigger: str) -> SessionEntry:
        chosen = strategy or self.compaction_strategy
        if chosen is None:
            raise InvalidInputError("compact() needs a strategy: pass one or set the agent's")
        request = CompactionRequest(self.session.id, tuple(await self.session.entries()), trigger)
        for hook in self.compaction_hooks:
            request = await hook(request)
            if request.session_id != self.session.id:
                raise InvalidInputError("a compaction_request hook may not change the session")
        entry = chosen.compact(list(request.entries), session_id=self.session.id, trigger=trigger)
        # A hook may have trimmed the tail it folds; the compaction still lands at the leaf,
        # as resolved when it is appended.
        stored = await self.session.append(entry)
        self.last_compacted = stored
        return stored


def replace_parent(entry: SessionEntry, parent_id: str | None) -> SessionEntry:
    """A copy of ``entry`` under another parent."""
    return entry.model_copy(update={"parent_id": parent_id})


def _tool_call(event: ToolCallEvent) -> tuple[ToolCall, int]:
    """The call as stored, and how many surrogates were replaced to make it storable."""
    try:
        arguments = json.loads(event.arguments or "{}")
    except (ValueError, RecursionError):
        arguments = {"_raw": event.arguments}
    # Nested deeper than an entry may hold: kept whole as text, like arguments not JSON.
    if not isinstance(arguments, dict) or find_too_deep(arguments) is not None:
        arguments = {"_raw": event.arguments}
    (call_id, name, arguments), replaced = _sanitize_value((event.id, event.name, arguments))
    return ToolCall(id=call_id, name=name, arguments=arguments), replaced
