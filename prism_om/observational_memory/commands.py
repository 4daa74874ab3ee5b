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
     "runtime": {"inFlight": false, "lastError": null}}     # null without a runtime

``om:view`` data: ``{"mode": "visible"|"full", "reflectionIds": [...],
"observationIds": [...]}``, or ``{"mode": null, "error": "usage"}`` with the text
``Usage: /om:view [full]`` for any other argument.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..tokens import TokenEstimator, get_estimator
from ._source import is_store
from .context import MEMORY_BLOCK_NAME, ContextBlock, build_observational_memory_context_blocks
from .ledger import ObservationalMemoryLedger, fold_observational_memory_ledger
from .projection import active_memory
from .recall_tool import BranchSource, GetEntries
from .recent import DEFAULT_KEEP_RECENT_ENTRIES, check_keep_recent_entries
from .redact import Redactor, redactor
from .relevance import observation_pool_tokens
from .render import render_observational_memory_details
from .textcap import truncate_utf8

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
    ) -> None:
        self._source = source
        self._redactor = redactor(secrets)
        self._keep = check_keep_recent_entries(keep_recent_entries)
        self._estimator = estimator

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    async def _read(self, session_id: str) -> _MemoryView:
        branch = await self._source.open(session_id)
        # The context builder itself decides what is visible (recent-message window,
        # work-scope projection, render cap), so a command never disagrees with what the
        # agent is shown.
        if is_store(branch):
            ledger = await branch.ledger(session_id)
            blocks = await build_observational_memory_context_blocks(
                branch,
                session_id=session_id,
                keep_recent_entries=self._keep,
                secrets=self._redactor,
                estimator=self._estimator,
            )
        else:
            ledger = fold_observational_memory_ledger(branch)
            blocks = build_observational_memory_context_blocks(
                branch,
                keep_recent_entries=self._keep,
                secrets=self._redactor,
                estimator=self._estimator,
            )
        block = next((b for b in blocks if b.name == MEMORY_BLOCK_NAME), None)
        return _MemoryView(ledger, block)


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
        active_obs, _ = active_memory(ledger)
        data: dict[str, Any] = {
            "sessionId": session_id,
            "observations": {
                "recorded": len(ledger.observations),
                "dropped": len(ledger.dropped_observation_ids),
                "active": len(active_obs),
                "visible": len(view.visible_observation_ids),
            },
            "reflections": {
                "recorded": len(ledger.reflections),
                "visible": len(view.visible_reflection_ids),
            },
            "tokens": {
                "observationPool": observation_pool_tokens(
                    [r.observation for r in active_obs], est
                ),
                "renderedMemory": view.block.tokens if view.block is not None else 0,
            },
            "runtime": self._runtime_state(),
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


def _status_text(data: dict[str, Any]) -> str:
    obs, refl, tokens = data["observations"], data["reflections"], data["tokens"]
    lines = [
        "Observational memory status",
        f"observations: recorded {obs['recorded']}, dropped {obs['dropped']}, "
        f"active {obs['active']}, visible {obs['visible']}",
        f"reflections: recorded {refl['recorded']}, visible {refl['visible']}",
        f"tokens: observation pool {tokens['observationPool']}, "
        f"rendered memory {tokens['renderedMemory']}",
    ]
    runtime = data["runtime"]
    if runtime is not None:
        lines.append(
            f"runtime: in flight {'yes' if runtime['inFlight'] else 'no'}, "
            f"last error {runtime['lastError'] or 'none'}"
        )
    return "\n".join(lines)


class MemoryViewCommand(_MemoryCommand):
    """``om:view``: the visible memory (default) or all active memory (``full``)."""

    name = VIEW_COMMAND_NAME
    description = "Show the observational memory the agent sees; 'full' shows all active memory."

    async def run(self, args: str = "", *, session_id: str) -> CommandResult:
        mode = args.strip() if isinstance(args, str) else None
        if mode not in ("", "full"):
            return CommandResult(VIEW_USAGE, {"mode": None, "error": "usage"})
        view = await self._read(session_id)
        if mode == "full":
            # Every active recorded item: no recent-window, scope or visibility filter.
            observations, reflections = active_memory(view.ledger)
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
        data = {
            "mode": "full" if mode else "visible",
            "reflectionIds": reflection_ids,
            "observationIds": observation_ids,
        }
        return CommandResult(text or _EMPTY_TEXT, data)


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
) -> MemoryStatusCommand:
    """``om:status`` over a host callback or a store (exactly one).

    ``runtime`` is read loosely (``in_flight``, ``last_error`` attributes);
    ``keep_recent_entries`` must match the context setting for "visible" to agree with it.
    """
    return MemoryStatusCommand(
        BranchSource(get_entries=get_entries, store=store),
        runtime=runtime,
        secrets=secrets,
        keep_recent_entries=keep_recent_entries,
        estimator=estimator,
    )


def create_memory_view_command(
    *,
    get_entries: GetEntries | None = None,
    store: SessionStore | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    estimator: TokenEstimator | None = None,
) -> MemoryViewCommand:
    """``om:view`` over a host callback or a store (exactly one)."""
    return MemoryViewCommand(
        BranchSource(get_entries=get_entries, store=store),
        secrets=secrets,
        keep_recent_entries=keep_recent_entries,
        estimator=estimator,
    )


def create_observational_memory_commands(
    *,
    get_entries: GetEntries | None = None,
    store: SessionStore | None = None,
    runtime: object | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    estimator: TokenEstimator | None = None,
) -> ObservationalMemoryCommands:
    """Both commands over one source."""
    return ObservationalMemoryCommands(
        status=create_memory_status_command(
            get_entries=get_entries,
            store=store,
            runtime=runtime,
            secrets=secrets,
            keep_recent_entries=keep_recent_entries,
            estimator=estimator,
        ),
        view=create_memory_view_command(
            get_entries=get_entries,
            store=store,
            secrets=secrets,
            keep_recent_entries=keep_recent_entries,
            estimator=estimator,
        ),
    )
