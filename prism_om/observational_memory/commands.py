"""The optional ``om:status`` and ``om:view`` commands.

A command is an object with a ``name`` and ``async run(args, *, session_id)`` returning a
``CommandResult``: ``text`` for the user, ``data`` (JSON-serialisable) for a host UI.
Both read one session's current branch through a host ``get_entries`` callback or a
store (indexed path: ``ledger()`` and ``recent_messages()`` only), and fail closed with
``SessionMismatchError`` when that branch is not the calling session's.

``om:status`` data::

    {"sessionId": "s1",
     "observations": {"recorded": 5, "dropped": 1, "active": 4, "visible": 3},
     "reflections": {"recorded": 2, "visible": 2},
     "tokens": {"observationPool": 120, "renderedMemory": 180},
     "runtime": {"inFlight": false, "lastError": null},     # null without a runtime
     "revoked": {"observationIds": [], "reflectionIds": []},
     "visibleIds": {"reflectionIds": [...], "observationIds": [...]}}  # recall these

``om:view`` data: ``{"mode": "visible"|"full", "reflectionIds": [...],
"observationIds": [...], "sharedReflectionIds": [...], "sharedObservationIds": [...],
"revokedIds": [...]}``, or ``{"mode": null, "error": "usage"}`` with the text
``Usage: /om:view [full]`` for any other argument.

Both commands see what the agent's context sees only when built with the same settings:
``keep_recent_entries`` / ``recent_message_max_tokens`` (``context.recentMessages`` /
``context.recentMessageMaxTokens``), the invalidation set, and for ``om:view`` the shared
scopes. ``attached.commands()`` builds them that way. Invalidated memory is withheld as
:mod:`.withheld` says and listed as ``[revoked] <id>`` lines (ids only), in status data
under ``"revoked"``. ``om:view`` merges granted shared-scope memory (visible mode: the
scopes in the current lineage, as the context block does; ``full``: every granted scope);
``om:status`` counts stay session-local. ``secrets`` are redacted from text and data
alike, the session id included (the host's text, as a message is; memory ids are drawn
by prism_om).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..core.context_blocks import MEMORY_BLOCK_NAME, ContextBlock
from ..core.ledger import ObservationalMemoryLedger, fold_ledger
from ..core.limits import validate_limit
from ..core.projection import active_memory
from ..core.recent_window import DEFAULT_KEEP_RECENT_ENTRIES, check_keep_recent_entries
from ..core.redaction import Redactor, redactor
from ..core.relevance import observation_pool_tokens
from ..core.render import render_observational_memory_details
from ..core.scope_map import WorkScopeMap, fold_work_scope_map
from ..core.text_caps import truncate_utf8
from ..core.withheld import (
    REVOKED_MARKER,
    InvalidationSource,
    check_invalidation_source,
    resolve_invalidation,
    withheld_memory_ids,
)
from ..errors import InvalidInputError
from ..tokens import TokenEstimator, get_estimator
from ._source import BranchSource, GetEntries, build_observational_memory_context_blocks, is_store
from .shared_scopes import (
    ScopeAccessEvent,
    SharedScopeSpec,
    resolve_shared_scopes,
    shared_scope_block,
)

if TYPE_CHECKING:
    from ..stores.base import SessionStore

__all__ = [
    "STATUS_COMMAND_NAME",
    "VIEW_COMMAND_NAME",
    "VIEW_USAGE",
    "CommandResult",
    "MemoryStatusCommand",
    "MemoryViewCommand",
    "ObservationalMemoryCommands",
    "create_memory_status_command",
    "create_memory_view_command",
    "create_observational_memory_commands",
]

STATUS_COMMAND_NAME: Final = "om:status"
VIEW_COMMAND_NAME: Final = "om:view"
STATUS_USAGE: Final = "Usage: /om:status"
VIEW_USAGE: Final = "Usage: /om:view [full]"
_EMPTY_TEXT: Final = "No observational memory yet."
# A runtime's last error is shown bounded, like a worker error (1 KiB default).
_LAST_ERROR_MAX_BYTES: Final = 1024
# Revoked ids listed in text output; the data carries them all.
_REVOKED_LINES: Final = 50
# Visible memory ids on the status line; om:view lists them all.
_VISIBLE_IDS: Final = 20


@dataclass(frozen=True)
class CommandResult:
    """What a command answers: text for the user, data for a host."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _MemoryView:
    """The branch's full ledger and the memory block its context would inject now."""

    ledger: ObservationalMemoryLedger
    block: ContextBlock | None
    invalidated: frozenset[str] = frozenset()
    scope_map: WorkScopeMap | None = None
    request_tokens: int = 0
    """Every context block's tokens: what the next request carries for the branch."""
    branch: Any = None
    """What the view was read from: the store, or the branch's entries."""

    @property
    def revoked_ids(self) -> list[str]:
        observations, reflections = withheld_memory_ids(self.ledger, self.invalidated)
        return [*reflections, *observations]

    def _shown(self) -> tuple[str, ...]:
        return self.block.memory_ids if self.block is not None else ()

    @property
    def visible_observation_ids(self) -> list[str]:
        return [i for i in self._shown() if i in self.ledger.observations_by_id]

    @property
    def visible_reflection_ids(self) -> list[str]:
        return [i for i in self._shown() if i in self.ledger.reflections_by_id]


class _MemoryCommand:
    """Shared plumbing: the branch source, secrets, and what a command reads."""

    name: str
    description: str

    def __init__(
        self,
        source: BranchSource,
        *,
        secrets: Iterable[str] | Redactor | None,
        keep_recent_entries: int,
        estimator: TokenEstimator | None,
        recent_message_max_tokens: int | None = None,
        invalidated_ids: InvalidationSource = None,
    ) -> None:
        self._source = source
        self._redactor = redactor(secrets)
        self._keep = check_keep_recent_entries(keep_recent_entries)
        self._estimator = estimator
        if recent_message_max_tokens is not None:
            validate_limit("recent_message_max_tokens", recent_message_max_tokens)
        self._recent_max_tokens = recent_message_max_tokens
        self._invalidated = check_invalidation_source(invalidated_ids)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    async def _read(self, session_id: str) -> _MemoryView:
        branch = await self._source.open(session_id)
        # The context builder itself decides what is visible (recent-message window,
        # work-scope projection, render cap), so a command never disagrees with what the
        # agent is shown.
        invalid = await resolve_invalidation(self._invalidated)
        if is_store(branch):
            ledger = await branch.ledger(session_id)
            scope_map = await branch.scope_map(session_id)
            blocks = await build_observational_memory_context_blocks(
                branch,
                session_id=session_id,
                keep_recent_entries=self._keep,
                recent_message_max_tokens=self._recent_max_tokens,
                invalidated_ids=invalid,
                secrets=self._redactor,
                estimator=self._estimator,
                scope_map=scope_map,
            )
        else:
            ledger = fold_ledger(branch)
            scope_map = fold_work_scope_map(branch)
            blocks = build_observational_memory_context_blocks(
                branch,
                keep_recent_entries=self._keep,
                recent_message_max_tokens=self._recent_max_tokens,
                invalidated_ids=invalid,
                secrets=self._redactor,
                estimator=self._estimator,
                scope_map=scope_map,
            )
        block = next((b for b in blocks if b.name == MEMORY_BLOCK_NAME), None)
        return _MemoryView(ledger, block, invalid, scope_map, sum(b.tokens for b in blocks), branch)


class MemoryStatusCommand(_MemoryCommand):
    """``om:status``: memory counts, pool tokens and the optional runtime state."""

    name = STATUS_COMMAND_NAME
    description = "Show observational-memory counts, token sizes and worker state."

    def __init__(self, source: BranchSource, *, runtime: object | None, **kwargs: Any) -> None:
        super().__init__(source, **kwargs)
        self._runtime = runtime

    async def run(self, args: str = "", *, session_id: str) -> CommandResult:
        if not isinstance(args, str) or args.strip():
            return CommandResult(STATUS_USAGE, {"error": "usage"})
        view = await self._read(session_id)
        est = self._estimator or get_estimator()
        ledger = view.ledger
        usage, request = await _costs(view, session_id, est)
        active_obs, active_refl = active_memory(ledger, view.invalidated)
        withheld_obs, withheld_refl = withheld_memory_ids(ledger, view.invalidated)
        data: dict[str, Any] = {
            "sessionId": self._redactor.text(session_id),  # the host's text, as a message
            "observations": {
                "recorded": len(ledger.observations),
                "dropped": len(ledger.dropped_observation_ids),
                "active": len(active_obs),
                "visible": len(view.visible_observation_ids),
            },
            "reflections": {
                "recorded": len(ledger.reflections),
                "superseded": len(ledger.supersessions),
                "active": len(active_refl),
                "visible": len(view.visible_reflection_ids),
            },
            "tokens": {
                "observationPool": observation_pool_tokens(
                    [r.observation for r in active_obs], est
                ),
                "renderedMemory": view.block.tokens if view.block is not None else 0,
            },
            "runtime": self._runtime_state(),
            "revoked": {
                "observationIds": list(withheld_obs),
                "reflectionIds": list(withheld_refl),
            },
            # The ids a user passes to recall: what the context shows, as om:view lists it.
            "visibleIds": {
                "reflectionIds": view.visible_reflection_ids,
                "observationIds": view.visible_observation_ids,
            },
            # What memory costs (tokens each worker spent) and saves (the next request
            # against the whole branch): observational_memory/worker_usage.py.
            "usage": usage,
            "request": request,
        }
        return CommandResult(_status_text(data), data)

    def _runtime_state(self) -> dict[str, Any] | None:
        if self._runtime is None:
            return None
        # Read loosely: any runtime-like object will do, and a missing field reads as unset.
        in_flight = bool(getattr(self._runtime, "in_flight", False))
        error = getattr(self._runtime, "last_error", None)
        last_error = None
        if error is not None:
            text = self._redactor.text(str(error) or type(error).__name__)
            last_error = truncate_utf8(text, _LAST_ERROR_MAX_BYTES, "…")
        return {"inFlight": in_flight, "lastError": last_error}


async def _costs(
    view: _MemoryView, session_id: str, estimator: TokenEstimator
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The workers' recorded usage, and the next request's tokens against the branch's."""
    from .worker_usage import fold_worker_usage, store_worker_usage

    branch = view.branch
    if is_store(branch):
        usage = await store_worker_usage(branch, session_id)
        branch_tokens = await branch.branch_tokens(session_id)
    else:
        entries = list(branch or ())
        usage = fold_worker_usage(entries)
        branch_tokens = sum(estimator.count_entry(e) for e in entries if e.kind == "message")
    carried = view.request_tokens
    ratio = round(carried / branch_tokens, 3) if branch_tokens else None
    return usage, {
        "nextRequestTokens": carried,
        "branchTokens": branch_tokens,
        "ratio": ratio,
    }


def _status_text(data: dict[str, Any]) -> str:
    obs, refl, tokens = data["observations"], data["reflections"], data["tokens"]
    lines = [
        "Observational memory status",
        f"observations: recorded {obs['recorded']}, dropped {obs['dropped']}, "
        f"active {obs['active']}, visible {obs['visible']}",
        f"reflections: recorded {refl['recorded']}, superseded {refl['superseded']}, "
        f"active {refl['active']}, visible {refl['visible']}",
        f"tokens: observation pool {tokens['observationPool']}, "
        f"rendered memory {tokens['renderedMemory']}",
    ]
    shown = [*data["visibleIds"]["reflectionIds"], *data["visibleIds"]["observationIds"]]
    if shown:
        listed = ", ".join(shown[:_VISIBLE_IDS])
        more = f" … and {len(shown) - _VISIBLE_IDS} more" if len(shown) > _VISIBLE_IDS else ""
        lines.append(f"visible ids (recall ID): {listed}{more}")
    request = data["request"]
    ratio = "" if request["ratio"] is None else f" = {request['ratio']:.0%}"
    lines.append(
        f"next request: {request['nextRequestTokens']:,} tokens of context blocks, against "
        f"the whole branch's {request['branchTokens']:,}{ratio}"
    )
    from .worker_usage import usage_lines

    lines += usage_lines(data["usage"])
    runtime = data["runtime"]
    if runtime is not None:
        lines.append(
            f"runtime: in flight {'yes' if runtime['inFlight'] else 'no'}, "
            f"last error {runtime['lastError'] or 'none'}"
        )
    revoked = data["revoked"]
    lines += _revoked_lines([*revoked["reflectionIds"], *revoked["observationIds"]])
    return "\n".join(lines)


def _revoked_lines(ids: list[str]) -> list[str]:
    """``[revoked] <id>`` per withheld memory id: where it was, never what it said."""
    if not ids:
        return []
    lines = [f"withheld (revoked): {len(ids)}"]
    lines += [f"{REVOKED_MARKER} {i}" for i in ids[:_REVOKED_LINES]]
    if len(ids) > _REVOKED_LINES:
        lines.append(f"… and {len(ids) - _REVOKED_LINES} more")
    return lines


class MemoryViewCommand(_MemoryCommand):
    """``om:view``: the visible memory (default) or all active memory (``full``)."""

    name = VIEW_COMMAND_NAME
    description = "Show the observational memory the agent sees; 'full' shows all active memory."

    def __init__(
        self,
        source: BranchSource,
        *,
        shared_scopes: Mapping[str, SharedScopeSpec] | None = None,
        on_scope_access: Callable[[ScopeAccessEvent], object] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(source, **kwargs)
        if shared_scopes is not None and not isinstance(shared_scopes, Mapping):
            raise InvalidInputError("shared_scopes must map scope ids to SharedScopeSpec")
        self._shared = dict(shared_scopes or {})
        self._on_access = on_scope_access

    async def _shared_block(
        self, session_id: str, view: _MemoryView, *, lineage_only: bool
    ) -> tuple[ContextBlock | None, frozenset[str]]:
        """The granted memory block and the reflection ids among its memory ids."""
        if not self._shared or view.scope_map is None:
            return None, frozenset()
        resolved = await resolve_shared_scopes(
            scopes=self._shared,
            principal_id=session_id,
            scope_map=view.scope_map,
            on_access=self._on_access,
        )
        reflections = frozenset(
            i for m in resolved.memory.values() for i in m.ledger.reflections_by_id
        )
        return shared_scope_block(
            resolved.memory,
            view.scope_map,
            invalidated_ids=view.invalidated,
            secrets=self._redactor,
            estimator=self._estimator,
            lineage_only=lineage_only,
        ), reflections

    async def run(self, args: str = "", *, session_id: str) -> CommandResult:
        mode = args.strip() if isinstance(args, str) else None
        if mode not in ("", "full"):
            return CommandResult(VIEW_USAGE, {"mode": None, "error": "usage"})
        view = await self._read(session_id)
        if mode == "full":
            # Every active recorded item: no recent-window, scope or visibility filter.
            observations, reflections = active_memory(view.ledger, view.invalidated)
            rendered = render_observational_memory_details(
                [r.reflection for r in reflections],
                [r.observation for r in observations],
                secrets=self._redactor,
            )
            text = rendered.text
            reflection_ids = list(rendered.reflection_ids)
            observation_ids = list(rendered.observation_ids)
        else:
            text = view.block.text if view.block is not None else ""
            reflection_ids = view.visible_reflection_ids
            observation_ids = view.visible_observation_ids
        shared, shared_refl = await self._shared_block(
            session_id, view, lineage_only=mode != "full"
        )
        shared_ids = shared.memory_ids if shared is not None else ()
        revoked = view.revoked_ids
        data = {
            "mode": "full" if mode else "visible",
            "reflectionIds": reflection_ids,
            "observationIds": observation_ids,
            "sharedReflectionIds": [i for i in shared_ids if i in shared_refl],
            "sharedObservationIds": [i for i in shared_ids if i not in shared_refl],
            "revokedIds": revoked,
        }
        parts = [text or _EMPTY_TEXT]
        if shared is not None:
            parts.append(f"Shared work scopes (granted to this session):\n{shared.text}")
        if revoked:
            parts.append("\n".join(_revoked_lines(revoked)))
        return CommandResult("\n\n".join(parts), data)


@dataclass(frozen=True)
class ObservationalMemoryCommands:
    """Both commands, also iterable as ``(status, view)``."""

    status: MemoryStatusCommand
    view: MemoryViewCommand

    def __iter__(self) -> Any:
        return iter((self.status, self.view))


def create_memory_status_command(
    *,
    get_entries: GetEntries | None = None,
    store: SessionStore | None = None,
    runtime: object | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    estimator: TokenEstimator | None = None,
    recent_message_max_tokens: int | None = None,
    invalidated_ids: InvalidationSource = None,
) -> MemoryStatusCommand:
    """``om:status`` over a host callback or a store (exactly one).

    ``runtime`` is read loosely (``in_flight``, ``last_error`` attributes);
    ``keep_recent_entries`` / ``recent_message_max_tokens`` must match the context
    settings for "visible" to agree with it; ``invalidated_ids`` (a set, or a callable
    asked on every run) is withheld as the context withholds it.
    """
    return MemoryStatusCommand(
        BranchSource(get_entries=get_entries, store=store),
        runtime=runtime,
        secrets=secrets,
        keep_recent_entries=keep_recent_entries,
        estimator=estimator,
        recent_message_max_tokens=recent_message_max_tokens,
        invalidated_ids=invalidated_ids,
    )


def create_memory_view_command(
    *,
    get_entries: GetEntries | None = None,
    store: SessionStore | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    estimator: TokenEstimator | None = None,
    recent_message_max_tokens: int | None = None,
    invalidated_ids: InvalidationSource = None,
    shared_scopes: Mapping[str, SharedScopeSpec] | None = None,
    on_scope_access: Callable[[ScopeAccessEvent], object] | None = None,
) -> MemoryViewCommand:
    """``om:view`` over a host callback or a store (exactly one).

    ``shared_scopes`` / ``on_scope_access`` are ``attach()``'s: granted memory is merged
    into the view, re-resolved (grants re-read) on every run.
    """
    return MemoryViewCommand(
        BranchSource(get_entries=get_entries, store=store),
        secrets=secrets,
        keep_recent_entries=keep_recent_entries,
        estimator=estimator,
        recent_message_max_tokens=recent_message_max_tokens,
        invalidated_ids=invalidated_ids,
        shared_scopes=shared_scopes,
        on_scope_access=on_scope_access,
    )


def create_observational_memory_commands(
    *,
    get_entries: GetEntries | None = None,
    store: SessionStore | None = None,
    runtime: object | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    estimator: TokenEstimator | None = None,
    recent_message_max_tokens: int | None = None,
    invalidated_ids: InvalidationSource = None,
    shared_scopes: Mapping[str, SharedScopeSpec] | None = None,
    on_scope_access: Callable[[ScopeAccessEvent], object] | None = None,
) -> ObservationalMemoryCommands:
    """Both commands over one source, with one set of context options."""
    common: dict[str, Any] = {
        "get_entries": get_entries,
        "store": store,
        "secrets": secrets,
        "keep_recent_entries": keep_recent_entries,
        "estimator": estimator,
        "recent_message_max_tokens": recent_message_max_tokens,
        "invalidated_ids": invalidated_ids,
    }
    return ObservationalMemoryCommands(
        status=create_memory_status_command(runtime=runtime, **common),
        view=create_memory_view_command(
            shared_scopes=shared_scopes, on_scope_access=on_scope_access, **common
        ),
    )
