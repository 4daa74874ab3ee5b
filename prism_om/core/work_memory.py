"""``project_work_memory``: the observations and reflections a scope query selects.

A query starts ``from_`` one scope (default: the map's current scope) and selects scopes:

=====================  ================================================================
``self``               the scope alone
``self+ancestors``     the scope and its parents up to the ``session`` root (default)
``self+descendants``   the scope and everything below it
``lineage``            ancestors, the scope and descendants
=====================  ================================================================

Closed scopes are hidden by default (``closed="hide"``), except ``from_`` itself and its
closed ancestors, which stay available so work inside a closed plan still sees it;
``closed="include"`` keeps every selected scope. ``kinds`` keeps only scopes of those
kinds (the root's kind is ``session``). Memory is selected when any scope it is bound to
is selected; memory bound nowhere belongs to the root. Only *active* memory is returned
(recorded, not dropped, not invalidated), in record order, with an outline of the tree.
Exact-id recall does not go through this filter.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Final, Literal, get_args

from ..errors import InvalidInputError
from .ledger import ObservationalMemoryLedger
from .projection import active_memory
from .records import Observation, Reflection
from .scope_map import ROOT_SCOPE_ID, WorkScopeMap, memory_ref

__all__ = [
    "ClosedMode",
    "IncludeMode",
    "WorkMemoryProjection",
    "project_work_memory",
    "render_scope_outline",
]

IncludeMode = Literal["self", "self+ancestors", "self+descendants", "lineage"]
ClosedMode = Literal["hide", "include"]

# Outline lines cut long kinds and labels: 256 scopes of 512-character labels would
# otherwise crowd the 256 KiB rendered-memory cap; the full text stays in the map.
_OUTLINE_KIND_CHARS: Final = 64
_OUTLINE_LABEL_CHARS: Final = 120


@dataclass(frozen=True)
class WorkMemoryProjection:
    """What a scope query selects."""

    from_scope: str
    scope_ids: tuple[str, ...]
    """Selected scopes, in opening order (root first)."""
    observations: tuple[Observation, ...]
    reflections: tuple[Reflection, ...]
    outline: str


def _selected(
    scope_map: WorkScopeMap,
    from_: str,
    include: IncludeMode,
    closed: ClosedMode,
    kinds: Collection[str] | None,
) -> set[str]:
    ancestors = scope_map.ancestors(from_)
    chosen = {from_}
    if include in ("self+ancestors", "lineage"):
        chosen.update(ancestors)
    if include in ("self+descendants", "lineage"):
        chosen.update(scope_map.descendants(from_))
    if closed == "hide":
        kept = {from_, *ancestors}
        chosen = {s for s in chosen if s in kept or not scope_map.scopes[s].closed}
    if kinds is not None:
        wanted = set(kinds)
        chosen = {s for s in chosen if scope_map.scopes[s].kind in wanted}
    return chosen


def project_work_memory(
    ledger: ObservationalMemoryLedger,
    scope_map: WorkScopeMap,
    *,
    from_: str | None = None,
    include: IncludeMode = "self+ancestors",
    closed: ClosedMode = "hide",
    kinds: Iterable[str] | None = None,
    invalidated_ids: Collection[str] | None = None,
) -> WorkMemoryProjection:
    """Filter a ledger's active memory through a scope query. Pure, O(memory + binds)."""
    start = scope_map.current if from_ is None else from_
    if start not in scope_map.scopes:
        raise InvalidInputError(f"scope {start!r} is not open on this branch")
    if include not in get_args(IncludeMode):
        raise InvalidInputError(f"include must be one of {get_args(IncludeMode)}, got {include!r}")
    if closed not in get_args(ClosedMode):
        raise InvalidInputError(f"closed must be one of {get_args(ClosedMode)}, got {closed!r}")
    if isinstance(kinds, str):
        raise InvalidInputError("kinds must be a collection of strings, not one string")
    kind_set = None if kinds is None else frozenset(kinds)
    chosen = _selected(scope_map, start, include, closed, kind_set)

    bound_anywhere: set[str] = set()
    bound_chosen: set[str] = set()
    for scope in scope_map.scopes.values():
        bound_anywhere.update(scope.binds)
        if scope.id in chosen:
            bound_chosen.update(scope.binds)
    root_chosen = ROOT_SCOPE_ID in chosen

    def selected(ref: str) -> bool:
        return ref in bound_chosen or (root_chosen and ref not in bound_anywhere)

    observations, reflections = active_memory(ledger, invalidated_ids)
    return WorkMemoryProjection(
        from_scope=start,
        scope_ids=tuple(s for s in scope_map.scopes if s in chosen),
        observations=tuple(
            r.observation for r in observations if selected(memory_ref("observation", r.id))
        ),
        reflections=tuple(
            r.reflection for r in reflections if selected(memory_ref("reflection", r.id))
        ),
        outline=render_scope_outline(scope_map, current=start, closed=closed),
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_scope_outline(
    scope_map: WorkScopeMap, *, current: str | None = None, closed: ClosedMode = "hide"
) -> str:
    """The scope tree as an indented list, marking ``[current]`` and ``[closed]`` scopes.

    With ``closed="hide"`` a closed scope is listed only when it is ``current`` or one of
    its ancestors (hiding it would orphan the current scope's line).
    """
    here = scope_map.current if current is None else current
    keep_closed = {here, *scope_map.ancestors(here)}
    lines: list[str] = []

    def walk(scope_id: str, indent: int) -> None:
        scope = scope_map.scopes[scope_id]
        if closed == "hide" and scope.closed and scope_id not in keep_closed:
            return
        line = f"{'  ' * indent}- {scope_id}"
        if scope.kind and scope_id != ROOT_SCOPE_ID:
            line += f" ({_cut(scope.kind, _OUTLINE_KIND_CHARS)})"
        if scope.label:
            line += f" {_cut(' '.join(scope.label.split()), _OUTLINE_LABEL_CHARS)}"
        if scope_id == here:
            line += " [current]"
        if scope.closed:
            line += " [closed]"
        lines.append(line)
        for child in scope_map.children(scope_id):
            walk(child, indent + 1)

    walk(ROOT_SCOPE_ID, 0)
    return "\n".join(lines)
