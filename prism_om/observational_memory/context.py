"""The per-turn provider context: an ``observational-memory`` block, then ``recent-messages``.

The memory block renders the *visible* memory: active reflections and observations,
minus observations whose every source message is shown whole in the recent-messages block
(they would only repeat it). A block is returned only when it has text: a branch with no
visible memory yields no ``observational-memory`` block, a branch with no eligible message
no ``recent-messages`` block, so hosts inject every returned block as is. ``passive=True``
returns no blocks at all (memory is still recorded by the runtime, just not injected).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ..entries import SessionEntry
from ..tokens import TokenEstimator, get_estimator
from .projection import build_observational_memory_projection
from .recent import DEFAULT_KEEP_RECENT_ENTRIES, recent_message_window
from .redact import Redactor, redactor
from .render import render_observational_memory_details

__all__ = [
    "MEMORY_BLOCK_NAME",
    "RECENT_MESSAGES_BLOCK_NAME",
    "ContextBlock",
    "build_observational_memory_context_blocks",
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
    """Branch entries the block stands for: the shown messages of ``recent-messages``; the
    source messages of the rendered memory of ``observational-memory`` (branch order)."""
    memory_ids: tuple[str, ...] = ()
    """Rendered reflection then observation ids (memory block only)."""


def build_observational_memory_context_blocks(
    entries: Sequence[SessionEntry],
    *,
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    recent_message_max_tokens: int | None = None,
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    estimator: TokenEstimator | None = None,
    passive: bool = False,
) -> list[ContextBlock]:
    """The context blocks for a branch (entries root first), in injection order. O(n)."""
    if passive:
        return []
    est = estimator or get_estimator()
    red = redactor(secrets)
    window = recent_message_window(
        entries,
        keep_recent_entries,
        max_tokens=recent_message_max_tokens,
        estimator=est,
        secrets=red,
    )
    projection = build_observational_memory_projection(
        entries,
        invalidated_ids=invalidated_ids,
        recent_entry_ids=window.complete_entry_ids,
    )
    rendered = render_observational_memory_details(
        projection.visible_reflections, projection.visible_observations, secrets=red
    )
    blocks: list[ContextBlock] = []
    if rendered.text:
        shown = set(rendered.observation_ids)
        sources = {
            s for o in projection.visible_observations if o.id in shown for s in o.source_entry_ids
        }
        blocks.append(
            ContextBlock(
                name=MEMORY_BLOCK_NAME,
                text=rendered.text,
                tokens=est.count(rendered.text),
                entry_ids=tuple(e.id for e in entries if e.id in sources),
                memory_ids=rendered.reflection_ids + rendered.observation_ids,
            )
        )
    if window.text:
        blocks.append(
            ContextBlock(
                name=RECENT_MESSAGES_BLOCK_NAME,
                text=window.text,
                tokens=est.count(window.text),
                entry_ids=window.entry_ids,
            )
        )
    return blocks
