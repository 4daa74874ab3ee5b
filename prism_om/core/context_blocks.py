"""The per-turn provider context: an ``observational-memory`` block, then ``recent-messages``.

The memory block renders the *visible* memory: active reflections and observations,
minus observations whose every source message is shown whole in the recent-messages block
(they would only repeat it). A block is returned only when it has text: a branch with no
visible memory yields no ``observational-memory`` block, a branch with no eligible message
no ``recent-messages`` block, so hosts inject every returned block as is. ``passive=True``
returns no blocks at all (memory is still recorded by the runtime, just not injected).

Once the branch has host work scopes (see :mod:`.scope_map`), the memory block renders
the work-scope projection instead of the whole pool: the current scope with its
ancestors, under a Scope Outline, then Reflections, then Observations. ``scope_map``
defaults to the branch's own map (folded from the entries, or ``store.scope_map``); a map
with only the implicit root renders exactly as before.

``invalidated_ids`` withholds on both blocks: revoked memory is not rendered, and a
revoked message in the recent window shows ``[revoked]`` in place of its text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from ..entries import SessionEntry
from ..tokens import TokenEstimator, get_estimator
from .branch_snapshot import BranchSnapshot, snapshot_from_branch
from .projection import visible_memory
from .recent_window import DEFAULT_KEEP_RECENT_ENTRIES, MessageBlocks, check_keep_recent_entries
from .records import Observation, Reflection
from .redaction import Redactor, redactor
from .render import RenderedMemory, render_observational_memory_details
from .request_window import RequestWindow, request_message_window
from .scope_map import WorkScopeMap
from .work_memory import project_work_memory

__all__ = [
    "MEMORY_BLOCK_NAME",
    "RECENT_MESSAGES_BLOCK_NAME",
    "ContextBlock",
    "BlockOptions",
    "build_observational_memory_context_blocks_from_entries",
    "context_blocks_from_snapshot",
    "context_blocks_with_window",
    "render_memory",
]

MEMORY_BLOCK_NAME: Final = "observational-memory"
RECENT_MESSAGES_BLOCK_NAME: Final = "recent-messages"


@dataclass(frozen=True)
class ContextBlock:
    """One named block of provider context."""

    name: str
    text: str
    tokens: int
    entry_ids: tuple[str, ...]
    """Branch entries the block stands for: the shown messages of ``recent-messages``
    (branch order); the source messages of the rendered memory of ``observational-memory``
    (in the order the rendered observations cite them)."""
    memory_ids: tuple[str, ...] = ()
    """Rendered reflection then observation ids (memory block only)."""


def build_observational_memory_context_blocks_from_entries(
    entries: Sequence[SessionEntry],
    *,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    recent_message_max_tokens: int | None = None,
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    estimator: TokenEstimator | None = None,
    passive: bool = False,
    scope_map: WorkScopeMap | None = None,
    budget_tokens: int | None = None,
) -> list[ContextBlock]:
    """The context blocks for a branch (entries root first), in injection order. O(n), pure."""
    keep = check_keep_recent_entries(keep_recent_entries)
    invalid = frozenset(invalidated_ids or ())
    options = BlockOptions(
        keep, recent_message_max_tokens, invalid, secrets, estimator, budget_tokens
    )
    if passive:
        return []
    branch = list(entries)  # read more than once: a one-shot iterator must not run dry
    snapshot = snapshot_from_branch(branch, keep, full=True, estimator=estimator)
    if scope_map is not None:
        snapshot = replace(snapshot, scope_map=scope_map)
    return context_blocks_from_snapshot(snapshot, options)


@dataclass(frozen=True)
class BlockOptions:
    """The caller's context settings, shared by the entries and store paths."""

    keep_recent_entries: int
    recent_message_max_tokens: int | None
    invalidated_ids: Iterable[str] | None
    secrets: Iterable[str] | Redactor | None
    estimator: TokenEstimator | None
    budget_tokens: int | None = None
    """What the model's input leaves for the window (see ``core.request_window``)."""
    blocks_of: MessageBlocks | None = None
    """Rendered message blocks kept from earlier turns (``core.recent_window``)."""


def context_blocks_from_snapshot(
    snapshot: BranchSnapshot, options: BlockOptions
) -> list[ContextBlock]:
    """The blocks of a branch snapshot: its visible memory, then its request window.

    The window follows ``core.request_window`` (every uncovered message, and at least the
    last ``keep_recent_entries``). With host scopes in the snapshot's map, the memory block
    renders the work-scope projection (current scope, ``self+ancestors``) with its outline.
    """
    return context_blocks_with_window(snapshot, options)[0]


MemoryRenderer = Callable[
    [Sequence[Reflection], Sequence[Observation], "str | None", Redactor, BranchSnapshot],
    tuple[RenderedMemory, int],
]
"""Renders the visible memory and counts its tokens: ``(reflections, observations, outline,
redactor, snapshot) -> (rendered, tokens)``. A host that builds blocks every turn passes
one that keeps what it rendered (``observational_memory.branch_view``)."""


def render_memory(
    reflections: Sequence[Reflection],
    observations: Sequence[Observation],
    outline: str | None,
    red: Redactor,
    snapshot: BranchSnapshot,
    estimator: TokenEstimator,
) -> tuple[RenderedMemory, int]:
    """The plain ``MemoryRenderer``: render, then count line by line."""
    rendered = render_observational_memory_details(
        reflections, observations, outline=outline, secrets=red
    )
    return rendered, estimator.count_lines(rendered.text) if rendered.text else 0


def context_blocks_with_window(
    snapshot: BranchSnapshot,
    options: BlockOptions,
    renderer: MemoryRenderer | None = None,
) -> tuple[list[ContextBlock], RequestWindow]:
    """``context_blocks_from_snapshot``, with the window it chose; ``renderer`` renders
    the memory block (default: ``render_memory``)."""
    # Both blocks are counted line by line (``count_lines``): from one turn to the next
    # most of their lines repeat, and only new lines are encoded.
    est = options.estimator or get_estimator()
    red = redactor(options.secrets)
    window = request_message_window(
        snapshot,
        options.keep_recent_entries,
        max_tokens=options.recent_message_max_tokens,
        budget_tokens=options.budget_tokens,
        estimator=est,
        secrets=red,
        invalidated_ids=options.invalidated_ids,
        blocks_of=options.blocks_of,
    )
    rendered_window = window.rendered
    assert rendered_window is not None
    ledger, scope_map = snapshot.ledger, snapshot.scope_map
    observations, reflections = visible_memory(
        ledger, options.invalidated_ids, rendered_window.complete_entry_ids
    )
    outline = None
    if scope_map.has_host_scopes:
        # Invalidation already shaped the visible memory; the scope query only narrows it.
        scoped = project_work_memory(ledger, scope_map)
        in_scope = {o.id for o in scoped.observations} | {r.id for r in scoped.reflections}
        reflections = tuple(r for r in reflections if r.id in in_scope)
        observations = tuple(o for o in observations if o.id in in_scope)
        outline = scoped.outline
    if renderer is None:
        rendered, memory_tokens = render_memory(
            reflections, observations, outline, red, snapshot, est
        )
    else:
        rendered, memory_tokens = renderer(reflections, observations, outline, red, snapshot)
    blocks: list[ContextBlock] = []
    if rendered.text:
        shown = set(rendered.observation_ids)
        # Source messages of the rendered memory, in the order the memory cites them.
        sources = dict.fromkeys(
            s for o in observations if o.id in shown for s in o.source_entry_ids
        )
        blocks.append(
            ContextBlock(
                name=MEMORY_BLOCK_NAME,
                text=rendered.text,
                tokens=memory_tokens,
                entry_ids=tuple(sources),
                memory_ids=rendered.reflection_ids + rendered.observation_ids,
            )
        )
    if rendered_window.text:
        blocks.append(
            ContextBlock(
                name=RECENT_MESSAGES_BLOCK_NAME,
                text=rendered_window.text,
                tokens=(
                    rendered_window.tokens
                    if rendered_window.tokens is not None
                    else est.count_lines(rendered_window.text)
                ),
                entry_ids=rendered_window.entry_ids,
            )
        )
    return blocks, window
