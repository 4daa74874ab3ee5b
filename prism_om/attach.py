"""Activation: ``create_observational_memory(...).attach(agent)``.

Attaching registers memory on the agent's own extension points (one mechanism: no proxy;
``attached.agent`` is the agent itself):

* a **context provider** (``agent.context_providers``) that renders the
  ``observational-memory`` and ``recent-messages`` blocks every turn from one snapshot of
  the branch (plus a ``shared-work-scopes`` block when granted shared scopes sit in the
  current scope lineage). The window holds every message memory has not covered yet and
  at least the last ``context.recent_messages`` (``core.request_window``), so a message is
  always in the memory, in the request, or both;
* the **compaction strategy** (``agent.compaction_strategy``, unless the agent has one),
  which renders the recorded memory as the summary and keeps every uncovered message;
* a **turn hook** (``agent.turn_hooks``): around each ``run`` / ``prompt`` / ``stream`` /
  ``compact`` / ``wrap_resume_run`` / ``wrap_resume_stream`` it resolves the invalidation
  set once, observes first when what memory lacks would not fit the request, and once the
  call has ended runs the observe / reflect / drop pipeline, then compacts when the gate
  says so.

A turn reads the store once: the branch snapshot (``SessionStore.snapshot``), or only a
leaf check when the snapshot held since the last turn is still current; the snapshot is
then advanced by the turn's own appends, the post-run flush decides from its counters
whether any worker is due (reading nothing when none is), and the gate estimates the next
request from it.

The gate is ``context.compact_after_tokens`` unless the host passes ``trigger`` (one of
``{"type": "tokens", "tokens": N}``, ``{"type": "input_ratio", "ratio": r}``,
``{"type": "entries", "count": N}``, ``{"type": "never"}``) or ``should_compact(context)``,
either of which replaces it. The token gates (``tokens``, ``input_ratio`` and the default)
compare the next request as it will be sent (system text, context blocks, replayed history;
the coming prompt excluded) with their threshold, counted with the settings'
``token_encoding`` like every other count of the attachment. When even a compaction would
leave that request at or above the threshold (what it keeps alone is too large), it is not
appended turn after turn: one ``observational-memory:compaction-insufficient`` event says
so. Post-run work is awaited before the call returns (deterministic for scripts and
tests) unless ``background=True``, which schedules it as a task that ``drain()`` waits
for. A worker failure never fails the user's call. Importing this module, creating the
memory or attaching it starts nothing and calls nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any, Final

from .core.branch_snapshot import BranchSnapshot
from .core.context_blocks import ContextBlock
from .core.relevance import observation_pool_tokens
from .core.render import render_observational_memory
from .core.withheld import InvalidationSource, check_invalidation_source, resolve_invalidation
from .debug import COMPACTION_INSUFFICIENT, COMPACTION_TRIGGER_ERROR, WINDOW_OVER_BUDGET
from .entries import SessionEntry, compaction_entry
from .errors import AmbiguousInputError, InvalidInputError, PrismMemoryError
from .host.agent import Agent, TurnKind, TurnRecord
from .host.context import (
    RECENT_MESSAGES_BLOCK,
    estimate_request_tokens,
    load_history_since_compaction,
    to_provider_messages,
)
from .observational_memory.branch_view import BranchView, TurnBlocks
from .observational_memory.commands import (
    ObservationalMemoryCommands,
    create_observational_memory_commands,
)
from .observational_memory.recall_tool import RecallMemoryTool, create_recall_memory_tool
from .observational_memory.search import SearchMemoryTool, create_search_memory_tool
from .observational_memory.settings import (
    ObservationalMemorySettings,
    reject_removed_settings,
    resolve_observational_memory_settings,
)
from .observational_memory.shared_scopes import (
    SHARED_BLOCK_NAME,
    ScopeAccessEvent,
    SharedScopeSpec,
    resolve_shared_scopes,
    shared_scope_block,
)
from .observational_memory.strategy import (
    ObservationalMemoryCompactionStrategy,
    create_observational_memory_compaction_strategy,
)
from .observational_memory.withholding import active_store_memory
from .providers.base import CredentialResolver, Provider, ProviderRequest
from .session import Session
from .tokens import TokenEstimator, get_estimator
from .workers.model import Model, coerce_model, resolve_input_cap
from .workers.runtime import (
    DebugSink,
    FlushResult,
    ObservationalMemoryRuntime,
    create_observational_memory_runtime,
)

__all__ = [
    "COMPACTION_INSUFFICIENT",
    "COMPACTION_TRIGGER_ERROR",
    "SHARED_BLOCK_NAME",
    "AttachedObservationalMemory",
    "CompactionContext",
    "ObservationalMemory",
    "ObservationalMemoryContextProvider",
    "create_observational_memory",
    "next_request_tokens",
]

TRIGGER_TYPES: Final = frozenset({"tokens", "input_ratio", "entries", "never"})

# Set inside memory's own post-run work (a task of its own in the background), so the
# compaction it starts is not taken for a new call of the agent.
_IN_POST_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "prism_om_in_post_run", default=False
)

ShouldCompact = Callable[["CompactionContext"], bool | Awaitable[bool]]
InvalidatedIds = InvalidationSource


def _check_trigger(trigger: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Validate a trigger union at creation time, before any session work."""
    if trigger is None:
        return None
    if not isinstance(trigger, Mapping):
        raise InvalidInputError(f"trigger must be a mapping with a 'type', got {trigger!r}")
    kind = trigger.get("type")
    if kind not in TRIGGER_TYPES:
        raise InvalidInputError(
            f"unknown trigger type {kind!r}: use one of {', '.join(sorted(TRIGGER_TYPES))}"
        )
    needs = {"tokens": "tokens", "entries": "count", "input_ratio": "ratio"}.get(kind)
    if needs is not None:
        value = trigger.get(needs)
        bad = isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        if bad or (kind != "input_ratio" and not isinstance(value, int)):
            raise InvalidInputError(f"trigger {kind!r} needs a positive {needs!r}, got {value!r}")
    return dict(trigger)


@dataclass
class CompactionContext:
    """What a compact-when gate may read; the token figures resolve lazily.

    ``estimated_input_tokens`` estimates the next provider request as it will be sent, the
    coming prompt excluded: the system text with every context block, then the history
    the host replays (the compaction summary, the messages it kept, everything since).
    """

    session: Session
    session_model: Model | None
    _tokens: int | None = field(default=None, repr=False)
    _entries: int | None = field(default=None, repr=False)
    agent: Agent | None = field(default=None, repr=False)
    """The agent whose next request is estimated; without one, a bare agent on
    ``session`` (no system text, no context blocks)."""
    estimator: TokenEstimator | None = field(default=None, repr=False)

    async def resolve_counts(self, *, tokens: bool = True, entries: bool = True) -> None:
        """Read the branch length and estimate the next request (each only when asked and
        not already known)."""
        if entries and self._entries is None:
            self._entries = await self.session.store.entry_count(self.session.id)
        if tokens and self._tokens is None:
            self._tokens = await next_request_tokens(self.session, self.agent, self.estimator)

    @property
    def entry_count(self) -> int:
        """Entries on the current branch."""
        assert self._entries is not None, "resolve_counts() first"
        return self._entries

    @property
    def estimated_input_tokens(self) -> int:
        """Estimated tokens of the next request, the coming prompt excluded."""
        assert self._tokens is not None, "resolve_counts() first"
        return self._tokens

    @property
    def input_cap_tokens(self) -> int:
        """The session model's context window minus its output reserve; raises if unknown."""
        if self.session_model is None:
            raise InvalidInputError("no session model: the input cap cannot be resolved")
        return resolve_input_cap(self.session_model)


async def next_request_tokens(
    session: Session, agent: Agent | None = None, estimator: TokenEstimator | None = None
) -> int:
    """Estimated input tokens of ``agent``'s next request on ``session``, prompt excluded."""
    if agent is not None:
        request = await agent.request_preview(None)
    else:
        history = await load_history_since_compaction(session)
        request = ProviderRequest(messages=to_provider_messages(history))
    return estimate_request_tokens(request, estimator)


class ObservationalMemoryContextProvider:
    """Renders the memory blocks of a session every turn, from one snapshot of its branch.

    The blocks come from a ``BranchView``: one ``SessionStore.snapshot`` per turn (or,
    when the session's leaf has not moved since the last one, only a leaf check), the
    memory block kept while what it shows is unchanged, and the request window of
    ``core.request_window``: every message memory has not covered yet, and at least the
    last ``context.recent_messages``. ``input_tokens`` (set by ``attach``) is what the
    model's input holds for the system text and the blocks; when the uncovered messages
    do not fit what the memory block leaves of it, the newest that fit are shown and a
    ``WINDOW_OVER_BUDGET`` warning names the rest (``on_event``), never a silent drop.
    """

    def __init__(
        self,
        settings: ObservationalMemorySettings,
        *,
        secrets: Sequence[str] = (),
        invalidated_ids: InvalidatedIds = None,
        shared_scopes: Mapping[str, SharedScopeSpec] | None = None,
        on_scope_access: Callable[[ScopeAccessEvent], object] | None = None,
        estimator: TokenEstimator | None = None,
    ) -> None:
        self.settings = settings
        self.estimator = estimator or get_estimator(settings.token_encoding)
        self._secrets = tuple(secrets)
        self._invalidated = check_invalidation_source(invalidated_ids)
        self._shared = dict(shared_scopes or {})
        self._on_access = on_scope_access
        context = settings.context
        self.view = BranchView(
            keep_recent_entries=context.recent_messages,
            recent_message_max_tokens=context.recent_message_max_tokens,
            estimator=self.estimator,
            secrets=self._secrets,
        )
        """The branch as the next turn sees it (one snapshot per turn)."""
        self.input_tokens: Callable[[], int | None] = lambda: None
        """What the model's input holds for the system text and the blocks (None: no
        limit); ``attach`` sets it from the session model (or ``compact_after_tokens``)."""
        self.on_event: Callable[[str, dict[str, Any]], None] | None = None
        self.last_blocks: TurnBlocks | None = None
        """The blocks the latest ``blocks()`` call built, with their snapshot and window."""
        self._turn_invalid: frozenset[str] | None = None
        # Set while one turn (or its post-run estimate) runs: the leaf was checked at its
        # start, so the snapshot held since (advanced by the turn's own appends) is used.
        self._trust_held = False
        self._estimating = False

    @property
    def shared_scopes(self) -> Mapping[str, SharedScopeSpec]:
        return dict(self._shared)

    @property
    def on_scope_access(self) -> Callable[[ScopeAccessEvent], object] | None:
        return self._on_access

    async def invalidated(self) -> frozenset[str]:
        """The invalidation set: the one resolved for the turn in flight (``turn``), else
        asked of the source now. The one normaliser every path uses: a callable returning
        one string (or non-string ids) fails closed here as it does in the recall tool."""
        if self._turn_invalid is not None:
            return self._turn_invalid
        return await resolve_invalidation(self._invalidated)

    @contextlib.asynccontextmanager
    async def turn(self, invalid: frozenset[str] | None = None) -> AsyncIterator[frozenset[str]]:
        """One turn's reads: the invalidation set resolved once (or ``invalid``, already
        resolved), and the branch's leaf checked once, by the first read."""
        if invalid is None:
            invalid = await resolve_invalidation(self._invalidated)
        self._turn_invalid, self._trust_held = invalid, False
        try:
            yield invalid
        finally:
            self._turn_invalid, self._trust_held = None, False

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Build from the snapshot held now, without checking the leaf again (the caller
        knows it is the one its own appends left), for an estimate: nothing is sent, so a
        window over budget is not warned of."""
        self._trust_held = self._estimating = True
        try:
            yield
        finally:
            self._trust_held = self._estimating = False

    async def blocks(self, session: Session) -> list[ContextBlock]:
        if self.settings.passive:
            return []
        invalid = await self.invalidated()
        snapshot = await self.view.read(session, full=bool(invalid), trust_held=self._trust_held)
        if self._turn_invalid is not None:
            self._trust_held = True  # checked once this turn
        built = self.view.blocks(snapshot, invalid)
        limit = self.input_tokens()
        if limit is not None:
            memory = sum(b.tokens for b in built.blocks if b.name != RECENT_MESSAGES_BLOCK)
            room = max(limit - memory, 1)
            window = sum(b.tokens for b in built.blocks if b.name == RECENT_MESSAGES_BLOCK)
            if window > room:
                built = self.view.blocks(snapshot, invalid, budget_tokens=room)
                self._warn_over_budget(built, room)
        self.last_blocks = built
        blocks = list(built.blocks)
        if self._shared:
            shared = await self.shared_block(session, snapshot.scope_map)
            if shared is not None:
                blocks.insert(1 if blocks and blocks[0].name != "recent-messages" else 0, shared)
        return blocks

    def _warn_over_budget(self, built: TurnBlocks, room: int) -> None:
        dropped = built.window.dropped_uncovered_ids
        if self._estimating or (not dropped and built.window.tail_complete):
            return  # an estimate of the next request sends nothing: nothing to warn of
        shown = built.window.selected
        self._emit(
            WINDOW_OVER_BUDGET,
            {
                "omittedEntryIds": list(dropped),
                "tailComplete": built.window.tail_complete,
                "windowTokens": room,
                "recallCursor": shown[0].id if shown else None,
            },
        )

    def _emit(self, event: str, data: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(event, data)

    async def shared_block(self, session: Session, scope_map: Any) -> ContextBlock | None:
        """Granted shared memory of the scopes in the current lineage, as one block."""
        resolved = await resolve_shared_scopes(
            scopes=self._shared,
            principal_id=session.id,
            scope_map=scope_map,
            on_access=self._on_access,
        )
        return shared_scope_block(
            resolved.memory,
            scope_map,
            invalidated_ids=await self.invalidated(),
            secrets=self._secrets,
            estimator=self.estimator,
        )

    async def shared_ledgers(self, session_id: str, session: Session) -> list[Any]:
        """Granted shared ledgers for exact-id recall (regardless of the leaf)."""
        if not self._shared:
            return []
        resolved = await resolve_shared_scopes(
            scopes=self._shared,
            principal_id=session_id,
            scope_map=await session.store.scope_map(session_id),
            on_access=self._on_access,
        )
        return [m.ledger for m in resolved.memory.values()]


@dataclass(frozen=True)
class ObservationalMemory:
    """Resolved settings plus the compact-when gate; ``attach`` binds it to an agent."""

    settings: ObservationalMemorySettings
    trigger: dict[str, Any] | None
    should_compact: ShouldCompact | None
    background: bool
    secrets: tuple[str, ...]
    debug: DebugSink | None
    invalidated_ids: InvalidatedIds
    estimator: TokenEstimator | None = None
    """The one token estimator (``settings.token_encoding``) the gate, the context, the
    strategy and the workers count with; resolved once by ``create_observational_memory``."""

    def token_estimator(self) -> TokenEstimator:
        return self.estimator or get_estimator(self.settings.token_encoding)

    def attach(
        self,
        agent: Agent,
        *,
        append_entry: Callable[[SessionEntry], Awaitable[Any]] | None = None,
        session_model: Model | str | Mapping[str, Any] | None = None,
        shared_scopes: Mapping[str, SharedScopeSpec] | None = None,
        on_scope_access: Callable[[ScopeAccessEvent], object] | None = None,
        credential_resolver: CredentialResolver | None = None,
        providers: Mapping[str, Provider] | None = None,
        **runtime_options: Any,
    ) -> AttachedObservationalMemory:
        """Register memory on ``agent``; returns the agent, runtime, context provider, strategy."""
        if not isinstance(agent, Agent):
            raise InvalidInputError("attach() takes a prism_om.host.Agent")
        reject_removed_settings(runtime_options, where="attach()")
        if "invalidated_ids" in runtime_options:
            raise InvalidInputError(
                "attach() takes no invalidated_ids: pass it to create_observational_memory()"
            )
        session = agent.session
        model = coerce_model(session_model) if session_model is not None else None
        if self.trigger is not None and self.trigger["type"] == "input_ratio":
            if model is None:
                raise InvalidInputError("an 'input_ratio' trigger needs session_model=...")
            resolve_input_cap(model)  # raises when the model declares no context window
        estimator = runtime_options.pop("estimator", None) or self.token_estimator()
        runtime = create_observational_memory_runtime(
            estimator=estimator,
            session=session,
            append_entry=append_entry or session.append,
            settings=self.settings,
            session_model=model,
            credential_resolver=credential_resolver,
            secrets=self.secrets,
            debug=self.debug,
            providers=providers,
            invalidated_ids=self.invalidated_ids,
            **runtime_options,
        )
        provider = ObservationalMemoryContextProvider(
            self.settings,
            secrets=self.secrets,
            invalidated_ids=self.invalidated_ids,
            shared_scopes=shared_scopes,
            on_scope_access=on_scope_access,
            estimator=estimator,
        )
        revoked = _Revoked()
        strategy = create_observational_memory_compaction_strategy(
            keep_recent_entries=self.settings.context.recent_messages,
            observations_pool_max_tokens=self.settings.context.observations_pool_max_tokens,
            recent_message_max_tokens=self.settings.context.recent_message_max_tokens,
            secrets=self.secrets,
            estimator=estimator,
            # The set resolved at the start of each call of the agent (the strategy is
            # synchronous; the source may be async), so every compaction withholds it.
            invalidated_ids=revoked.ids,
        )
        provider.on_event = runtime.emit_debug_event
        if agent.debug is None and self.debug is not None:
            agent.debug = runtime.emit_debug_event  # redacted and gated like memory's events
        agent.context_providers.append(provider)
        if agent.invalidated_ids is None:
            # The replayed history (passive memory, or no recent-messages block) withholds
            # what the memory withholds.
            agent.invalidated_ids = provider.invalidated
        if agent.compaction_strategy is None:
            agent.compaction_strategy = strategy
        attached = AttachedObservationalMemory(self, agent, runtime, provider, strategy, model)
        attached._revoked = revoked
        provider.input_tokens = attached.input_tokens
        # The one mechanism: memory registers on the agent's own extension points (its
        # context providers, compaction strategy and turn hooks); no proxy.
        agent.turn_hooks.append(_MemoryTurns(attached))
        return attached


def create_observational_memory(
    settings: Mapping[str, Any] | ObservationalMemorySettings | None = None,
    *,
    trigger: Mapping[str, Any] | None = None,
    should_compact: ShouldCompact | None = None,
    background: bool = False,
    secrets: Iterable[str] = (),
    debug: DebugSink | None = None,
    invalidated_ids: InvalidatedIds = None,
    **overrides: Any,
) -> ObservationalMemory:
    """Resolve settings and the compact-when gate; nothing starts until ``attach``.

    Raises ``RemovedSettingError`` for a removed flat settings key, ``InvalidInputError``
    for an unknown trigger type or a non-callable ``should_compact``, and
    ``AmbiguousInputError`` when both gates are given.
    """
    reject_removed_settings(overrides, where="create_observational_memory()")
    resolved = resolve_observational_memory_settings(settings, **overrides)
    checked = _check_trigger(trigger)
    if should_compact is not None and not callable(should_compact):
        raise InvalidInputError("should_compact must be a callable taking the context")
    if checked is not None and should_compact is not None:
        raise AmbiguousInputError("pass trigger or should_compact, not both")
    if isinstance(secrets, str):
        raise InvalidInputError("secrets must be a list of strings, not one string")
    return ObservationalMemory(
        resolved,
        checked,
        should_compact,
        bool(background),
        tuple(secrets),
        debug,
        check_invalidation_source(invalidated_ids),
        get_estimator(resolved.token_encoding),
    )


class AttachedObservationalMemory:
    """The result of ``attach``: the agent, the runtime, the context provider and the strategy."""

    def __init__(
        self,
        memory: ObservationalMemory,
        agent: Agent,
        runtime: ObservationalMemoryRuntime,
        context_provider: ObservationalMemoryContextProvider,
        strategy: ObservationalMemoryCompactionStrategy,
        session_model: Model | None,
    ) -> None:
        self.memory = memory
        self.runtime = runtime
        self.context_provider = context_provider
        self.estimator = context_provider.estimator
        """The one estimator every part of this attachment counts with."""
        self.strategy = strategy
        self.session_model = session_model
        self.agent = agent
        """The agent memory is attached to (the caller's own: ``attach`` registered on it)."""
        self._revoked = _Revoked()
        self.last_flush: FlushResult | None = None
        self.compactions: list[SessionEntry] = []
        self._runs_active = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._insufficient = False

    async def flush(self, **options: Any) -> FlushResult:
        """Run the pipeline now; skipped (``run_active``) while a call of the agent runs."""
        if self._runs_active:
            return FlushResult("skipped", reason="run_active")
        return await self.runtime.flush(**options)

    def recall_tool(self) -> RecallMemoryTool:
        """The ``recall`` tool over this session's store, merged with granted shared scopes."""
        session = self.agent.session

        async def shared(session_id: str) -> list[Any]:
            return await self.context_provider.shared_ledgers(session_id, session)

        return create_recall_memory_tool(
            store=session.store,
            secrets=self.memory.secrets,
            shared=shared,
            page_limit=self.memory.settings.retrieval.page_limit,
            invalidated_ids=self.context_provider.invalidated,
        )

    def search_tool(self) -> SearchMemoryTool:
        """The opt-in ``search_memory`` tool over this session's store: ranked search of its
        memory and messages, withheld and redacted as the context is; its hits carry the
        ids ``recall_tool()`` expands. Not given to the agent unless the host adds it."""
        return create_search_memory_tool(
            store=self.agent.session.store,
            secrets=self.memory.secrets,
            invalidated_ids=self.context_provider.invalidated,
        )

    def commands(self) -> ObservationalMemoryCommands:
        """``om:status`` / ``om:view`` seeing exactly what this agent's context sees.

        Same store, recent-message window, invalidation set (asked on every run), secrets
        and shared scopes as the context provider, and this runtime's state.
        """
        context = self.memory.settings.context
        return create_observational_memory_commands(
            store=self.agent.session.store,
            runtime=self.runtime,
            secrets=self.memory.secrets,
            keep_recent_entries=context.recent_messages,
            recent_message_max_tokens=context.recent_message_max_tokens,
            invalidated_ids=self.context_provider.invalidated,
            shared_scopes=self.context_provider.shared_scopes,
            on_scope_access=self.context_provider.on_scope_access,
            estimator=self.estimator,
        )

    async def current_strategy(self) -> ObservationalMemoryCompactionStrategy:
        """The attached strategy with the invalidation set as it stands now.

        The strategy is synchronous and pure, so the (possibly async) invalidation source
        is read here, right before each compaction, not once at attach time.
        """
        invalid = await self.context_provider.invalidated()
        return dataclasses.replace(self.strategy, invalidated_ids=invalid)

    async def next_request_tokens(self) -> int:
        """Estimated tokens of the agent's next request, the coming prompt excluded.

        What the token gates compare with their threshold: the system text with every
        context block, then the history the agent replays.
        """
        return await next_request_tokens(self.agent.session, self.agent, self.estimator)

    async def drain(self) -> None:
        """Wait for background post-run work scheduled so far."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- post-run work ----------------------------------------------------------------

    async def _next_tokens(self, invalid: frozenset[str] | None) -> int:
        """The next request's estimate from the snapshot the turn left (advanced by its own
        appends): no read, the memory block as rendered and counted this turn."""
        provider = self.context_provider
        async with provider.turn(invalid):
            with provider.held():
                return await self.next_request_tokens()

    def input_tokens(self) -> int:
        """What the model's input holds for the context blocks: the session model's input
        cap (``resolve_input_cap``), else ``context.compact_after_tokens``, less the agent's
        own system text and tool definitions (counted line by line, so once)."""
        model = self.session_model
        if model is not None and model.context_window is not None:
            cap = resolve_input_cap(model)
        else:
            cap = int(self.memory.settings.context.compact_after_tokens)
        agent = self.agent
        fixed = estimate_request_tokens(
            ProviderRequest(system=agent.system, tools=[t.definition for t in agent.tools]),
            self.estimator,
        )
        return max(cap - fixed, 1)

    async def _before_run(self, invalid: frozenset[str]) -> None:
        """Observe first when what memory has not covered would not fit the request (the
        inline runtime; a background one sends what fits and warns instead)."""
        if self.memory.background or self.memory.settings.passive:
            return
        provider = self.context_provider
        session = self.agent.session
        snapshot = await provider.view.read(session, full=bool(invalid))
        provider._trust_held = True  # the turn's blocks use this read
        last = provider.last_blocks
        memory = 0 if last is None else last.tokens - _window_tokens(last)
        room = (self.input_tokens() or 0) - memory
        if snapshot.tail_complete and snapshot.pending_tokens <= room:
            return
        result = await self.runtime.flush(
            snapshot=snapshot, invalidated=invalid, force_observer=True
        )
        if result.entry_ids:
            provider.view.forget()

    async def _after_run(
        self,
        *,
        compacted: bool = False,
        invalid: frozenset[str] | None = None,
        turn: TurnRecord | None = None,
    ) -> None:
        if self.memory.background:
            work = self._post_run(compacted, invalid, turn)
            task = asyncio.get_running_loop().create_task(work)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            await self._post_run(compacted, invalid, turn)

    async def _post_run(
        self, compacted: bool, invalid: frozenset[str] | None, turn: TurnRecord | None
    ) -> None:
        marked = _IN_POST_RUN.set(True)
        try:
            await self._post_run_work(compacted, invalid, turn)
        finally:
            _IN_POST_RUN.reset(marked)

    async def _post_run_work(
        self, compacted: bool, invalid: frozenset[str] | None, turn: TurnRecord | None
    ) -> None:
        try:
            view = self.context_provider.view
            # The turn's own entries move the snapshot forward without a read; anything
            # else (another writer, a memory record) and the view reads again when asked.
            snapshot = view.advance(turn.entries) if turn is not None else None
            if turn is None:
                view.forget()
            self.last_flush = await self.runtime.flush(snapshot=snapshot, invalidated=invalid)
            worked = bool(self.last_flush.entry_ids)
            if worked:
                view.forget()  # memory moved: the next build reads it
            if not compacted:
                known = None
                if not worked and snapshot is not None:
                    known = await self._next_tokens(invalid)
                kind = await self._gate(known, None if worked else snapshot)
                if kind is None:
                    self._insufficient = False
                elif await self._compaction_helps(kind):
                    strategy = await self.current_strategy()
                    entry = await self.agent.compact(strategy, trigger=kind)
                    self.compactions.append(entry)
                    view.forget()
                    await self._check_compaction_fits(kind)
        except PrismMemoryError as exc:
            # Memory work never fails the user's call; the error is reported, not raised.
            self._emit("observational-memory:post-run-error", {"error": str(exc)})
        except Exception as exc:
            # A host hook (``compaction_request``, a strategy) failing its own way is
            # reported the same way: the user's turn already happened and is stored.
            self._emit(
                "observational-memory:post-run-error", {"error": f"{type(exc).__name__}: {exc}"}
            )

    def _token_threshold(self, kind: str) -> float | None:
        """The token count at which ``kind`` fires, for the token-based gates."""
        trigger = self.memory.trigger
        if trigger is None and kind == "tokens":
            return self.memory.settings.context.compact_after_tokens
        if trigger is not None and kind == "tokens":
            return float(trigger["tokens"])
        if trigger is not None and kind == "input_ratio" and self.session_model is not None:
            return float(trigger["ratio"]) * resolve_input_cap(self.session_model)
        return None

    async def _compaction_helps(self, kind: str) -> bool:
        """Whether compacting now brings a token gate's next request under its threshold.

        What a compaction keeps (system text, context blocks, the rendered memory as its
        summary, the last messages) may alone exceed a small window; compacting then
        changes nothing but the store, turn after turn, so it is skipped and reported.
        A host gate (``should_compact``) and the ``entries`` trigger are obeyed as given.
        """
        threshold = self._token_threshold(kind)
        if threshold is None:
            return True
        agent, session = self.agent, self.agent.session
        request = await agent.request_preview(None)
        settings = self.memory.settings
        invalid = await self.context_provider.invalidated()
        observations, reflections = await active_store_memory(session.store, session.id, invalid)
        pool = observation_pool_tokens([r.observation for r in observations], self.estimator)
        if pool > settings.context.observations_pool_max_tokens:
            return True  # the strategy trims the pool to its cap
        after = estimate_request_tokens(request, self.estimator)
        if request.messages:
            # The host replays history: a compaction replaces it with the memory as a
            # summary and the messages the strategy keeps.
            summary = render_observational_memory(
                [r.reflection for r in reflections],
                [r.observation for r in observations],
                secrets=self.memory.secrets,
            )
            kept = await session.store.recent_messages(session.id, settings.context.recent_messages)
            folded = compaction_entry(session.id, summary, parent_id=None)
            after = estimate_request_tokens(
                ProviderRequest(
                    system=request.system,
                    messages=to_provider_messages([folded, *kept]),
                    tools=request.tools,
                ),
                self.estimator,
            )
        if after < threshold:
            return True
        self._report_insufficient(kind, after, threshold)
        return False

    async def _check_compaction_fits(self, kind: str) -> None:
        """Report a compaction that left the next request at or above the threshold."""
        threshold = self._token_threshold(kind)
        if threshold is None:
            return
        after = await self.next_request_tokens()
        if after >= threshold:
            self._report_insufficient(kind, after, threshold)
        else:
            self._insufficient = False

    def _report_insufficient(self, kind: str, after: int, threshold: float) -> None:
        # Once per episode: the next request stays above the threshold turn after turn.
        if not self._insufficient:
            self._insufficient = True
            self._emit(
                COMPACTION_INSUFFICIENT,
                {"trigger": kind, "estimatedInputTokens": after, "thresholdTokens": threshold},
            )

    async def _gate(
        self, tokens: int | None = None, snapshot: BranchSnapshot | None = None
    ) -> str | None:
        """The trigger type that fires now, or None. ``tokens``: the next request's estimate
        when the turn already tells it; ``snapshot``: the branch as the turn left it."""
        context = CompactionContext(
            self.agent.session,
            self.session_model,
            _tokens=tokens,
            _entries=None if snapshot is None else snapshot.entry_count,
            agent=self.agent,
            estimator=self.estimator,
        )
        trigger = self.memory.trigger
        kind = None if trigger is None else trigger["type"]
        if kind == "never":
            return None
        custom = self.memory.should_compact is not None
        await context.resolve_counts(tokens=kind != "entries", entries=custom)
        if self.memory.should_compact is not None:
            try:
                decision = self.memory.should_compact(context)
                if inspect.isawaitable(decision):
                    decision = await decision
            except Exception as exc:  # a host callback: any failure means "do not compact"
                self._emit(COMPACTION_TRIGGER_ERROR, {"error": f"{type(exc).__name__}: {exc}"})
                return None
            return "should_compact" if decision else None
        trigger = self.memory.trigger
        if trigger is None:
            limit = self.memory.settings.context.compact_after_tokens
            return "tokens" if context.estimated_input_tokens >= limit else None
        kind = trigger["type"]
        if kind == "tokens":
            return kind if context.estimated_input_tokens >= trigger["tokens"] else None
        if kind == "entries":
            return kind if await self._entries_since_compaction() >= trigger["count"] else None
        if kind == "input_ratio":
            ratio = context.estimated_input_tokens / context.input_cap_tokens
            return kind if ratio >= trigger["ratio"] else None
        return None

    async def _entries_since_compaction(self) -> int:
        session = self.agent.session
        total = await session.store.entry_count(session.id)
        compaction = await session.store.last_compaction(session.id)
        if compaction is None:
            return total
        return total - await session.store.entry_count(session.id, compaction.id)

    def _emit(self, event: str, data: dict[str, Any]) -> None:
        # The runtime's emitter redacts, gates and records errors as last_error.
        self.runtime.emit_debug_event(event, data)


class _Revoked:
    """The invalidation set of the call in flight, for the synchronous strategy to read."""

    def __init__(self) -> None:
        self.current: frozenset[str] = frozenset()

    def ids(self) -> frozenset[str]:
        return self.current


class _MemoryTurns:
    """Memory's turn hook (``Agent.turn_hooks``): each call of the agent counts as in
    flight (a manual flush skips with ``run_active``), resolves the invalidation set once,
    observes first when the request could not show what memory lacks, and when the call
    has ended runs the post-run work (observe / reflect / drop when due, then the gate)."""

    def __init__(self, attached: AttachedObservationalMemory) -> None:
        self._attached = attached

    @contextlib.asynccontextmanager
    async def turn(self, agent: Agent, kind: TurnKind) -> AsyncIterator[None]:
        attached = self._attached
        if _IN_POST_RUN.get():
            yield  # memory's own compaction, inside its post-run work
            return
        before = agent.last_turn
        attached._runs_active += 1
        ended = False
        try:
            async with attached.context_provider.turn() as invalid:
                attached._revoked.current = invalid
                if kind != "compact":
                    await attached._before_run(invalid)
                try:
                    yield
                except GeneratorExit:
                    ended = True  # a stream closed early: the turn still ended
                    raise
                ended = True
        finally:
            attached._runs_active -= 1
            if ended:
                turn = agent.last_turn if agent.last_turn is not before else None
                if kind == "compact" and agent.last_compacted is not None:
                    attached.compactions.append(agent.last_compacted)
                await attached._after_run(compacted=kind == "compact", invalid=invalid, turn=turn)


def _window_tokens(built: TurnBlocks) -> int:
    return sum(b.tokens for b in built.blocks if b.name == RECENT_MESSAGES_BLOCK)
