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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ..entries import SessionEntry
from ..tokens import TokenEstimator, get_estimator
from .ledger import ObservationalMemoryLedger, fold_ledger
from .projection import visible_memory
from .recent_window import (
    DEFAULT_KEEP_RECENT_ENTRIES,
    check_keep_recent_entries,
    recent_message_window,
    select_recent_message_entries_from_entries,
)
from .redaction import Redactor, redactor
from .render import render_observational_memory_details
from .scope_map import WorkScopeMap, fold_work_scope_map
from .work_memory import project_work_memory

__all__ = [
    "MEMORY_BLOCK_NAME",
    "RECENT_MESSAGES_BLOCK_NAME",
    "ContextBlock",
    "BlockOptions",
    "build_observational_memory_context_blocks_from_entries",
    "context_blocks_from_parts",
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
) -> list[ContextBlock]:
    """The context blocks for a branch (entries root first), in injection order. O(n), pure."""
    keep = check_keep_recent_entries(keep_recent_entries)
    # Read twice (recent window, projection): a one-shot iterator must not run dry.
    invalid = frozenset(invalidated_ids or ())
    options = BlockOptions(keep, recent_message_max_tokens, invalid, secrets, estimator)
    if passive:
        return []
    recent = select_recent_message_entries_from_entries(entries, keep)
    scopes = scope_map if scope_map is not None else fold_work_scope_map(entries)
    return context_blocks_from_parts(fold_ledger(entries), recent, options, scope_map=scopes)


@dataclass(frozen=True)
class BlockOptions:
    """The caller's context settings, shared by the entries and store paths."""

    keep_recent_entries: int
    recent_message_max_tokens: int | None
    invalidated_ids: Iterable[str] | None
    secrets: Iterable[str] | Redactor | None
    estimator: TokenEstimator | None


def context_blocks_from_parts(
    ledger: ObservationalMemoryLedger,
    recent: Sequence[SessionEntry],
    options: BlockOptions,
    *,
    scope_map: WorkScopeMap | None = None,
) -> list[ContextBlock]:
    """Blocks from a folded ledger and the branch's last eligible messages (oldest first).

    With a ``scope_map`` that has host scopes, the memory block renders the work-scope
    projection (current scope, ``self+ancestors``) with its outline.
    """
    # Both blocks are counted line by line (``count_lines``): from one turn to the next
    # most of their lines repeat, and only new lines are encoded.
    est = options.estimator or get_estimator()
    red = redactor(options.secrets)
    window = recent_message_window(
        recent,
        options.keep_recent_entries,
        max_tokens=options.recent_message_max_tokens,
        estimator=est,
        secrets=red,
        invalidated_ids=options.invalidated_ids,
    )
    observations, reflections = visible_memory(
        ledger, options.invalidated_ids, window.complete_entry_ids
    )
    outline = None
    if scope_map is not None and scope_map.has_host_scopes:
        # Invalidation already shaped the visible memory; the scope query only narrows it.
        scoped = project_work_memory(ledger, scope_map)
        in_scope = {o.id for o in scoped.observations} | {r.id for r in scoped.reflections}
        reflections = tuple(r for r in reflections if r.id in in_scope)
        observations = tuple(o for o in observations if o.id in in_scope)
        outline = scoped.outline
    rendered = render_observational_memory_details(
        reflections, observations, outline=outline, secrets=red
    )
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
                tokens=est.count_lines(rendered.text),
                entry_ids=tuple(sources),
                memory_ids=rendered.reflection_ids + rendered.observation_ids,
            )
        )
    if window.text:
        blocks.append(
            ContextBlock(
                name=RECENT_MESSAGES_BLOCK_NAME,
                text=window.text,
                tokens=est.count_lines(window.text),
                entry_ids=window.entry_ids,
            )
        )
    return blocks
