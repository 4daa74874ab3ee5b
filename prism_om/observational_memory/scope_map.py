"""The opt-in work-scope index: ``om.scope.*`` records and their fold.

A work scope is a host-named node in a tree under the implicit ``session`` root. Scopes
are opened, closed, entered and left (a stack), memory ids are bound to them many-to-many
(``om:<12-hex>`` for observations, ``reflection:<12-hex>`` for reflections), and a scope's
owner can grant other sessions (principals) read and write access to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..entries import SessionEntry
from ..ids import MEMORY_ID_PATTERN

__all__ = [
    "MAX_BINDS_PER_SCOPE",
    "MAX_PRINCIPALS_PER_SCOPE",
    "MAX_SCOPES",
    "MAX_SCOPE_DEPTH",
    "MAX_SCOPE_STACK",
    "MAX_SCOPE_TEXT_CHARS",
    "ROOT_SCOPE_ID",
    "SCOPE_ID_PATTERN",
    "SCOPE_BOUND",
    "SCOPE_CLOSED",
    "SCOPE_ENTERED",
    "SCOPE_GRANTED",
    "SCOPE_LEFT",
    "SCOPE_OPENED",
    "SCOPE_REVOKED",
    "SCOPE_UNBOUND",
    "WorkScope",
    "WorkScopeMap",
    "fold_work_scope_map",
    "is_scope_id",
    "parse_memory_ref",
]

ROOT_SCOPE_ID: Final = "session"
SCOPE_ID_PATTERN = re.compile(r"^[A-Za-z0-9._:/-]{1,128}$")
MAX_SCOPES: Final = 256
MAX_SCOPE_DEPTH: Final = 8
MAX_SCOPE_STACK: Final = 8
MAX_BINDS_PER_SCOPE: Final = 4096
MAX_PRINCIPALS_PER_SCOPE: Final = 1024
MAX_SCOPE_TEXT_CHARS: Final = 512

SCOPE_OPENED: Final = "om.scope.opened"
SCOPE_CLOSED: Final = "om.scope.closed"
SCOPE_ENTERED: Final = "om.scope.entered"
SCOPE_LEFT: Final = "om.scope.left"
SCOPE_BOUND: Final = "om.scope.bound"
SCOPE_UNBOUND: Final = "om.scope.unbound"
SCOPE_GRANTED: Final = "om.scope.granted"
SCOPE_REVOKED: Final = "om.scope.revoked"

_REF = re.compile(r"^(om|reflection):([a-f0-9]{12})$")


def is_scope_id(value: object) -> bool:
    """True for a well-formed host scope id (``[A-Za-z0-9._:/-]{1,128}`` without ``..``)."""
    return isinstance(value, str) and bool(SCOPE_ID_PATTERN.fullmatch(value)) and ".." not in value


def parse_memory_ref(ref: object) -> tuple[str, str] | None:
    """``("observation" | "reflection", id)`` for a bind ref, None when malformed."""
    if not isinstance(ref, str):
        return None
    match = _REF.fullmatch(ref)
    if match is None or not MEMORY_ID_PATTERN.fullmatch(match.group(2)):
        return None
    return ("observation" if match.group(1) == "om" else "reflection", match.group(2))


@dataclass(frozen=True)
class WorkScope:
    """One node of the scope tree."""

    id: str
    parent_id: str | None
    depth: int
    kind: str | None = None
    label: str | None = None
    closed: bool = False
    opened_entry_id: str | None = None
    binds: tuple[str, ...] = ()
    principals: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkScopeMap:
    """The folded scope index of one branch."""

    scopes: Mapping[str, WorkScope] = field(default_factory=dict)
    stack: tuple[str, ...] = ()

    @property
    def current(self) -> str:
        """The scope new memory is bound to: the top of the stack, else the root."""
        return self.stack[-1] if self.stack else ROOT_SCOPE_ID

    @property
    def has_host_scopes(self) -> bool:
        return len(self.scopes) > 1

    def ancestors(self, scope_id: str) -> list[str]:
        """Parents of ``scope_id`` from the nearest up to the root."""
        chain: list[str] = []
        scope = self.scopes.get(scope_id)
        while scope is not None and scope.parent_id is not None:
            chain.append(scope.parent_id)
            scope = self.scopes.get(scope.parent_id)
        return chain

    def descendants(self, scope_id: str) -> list[str]:
        """Every scope below ``scope_id``, in opening order."""
        found: list[str] = []
        wanted = {scope_id}
        for scope in self.scopes.values():
            if scope.parent_id in wanted:
                found.append(scope.id)
                wanted.add(scope.id)
        return found

    def scopes_of(self, ref: str) -> list[str]:
        """Scopes a ref is bound to."""
        return [s.id for s in self.scopes.values() if ref in s.binds]


@dataclass
class _Mutable:
    id: str
    parent_id: str | None
    depth: int
    kind: str | None
    label: str | None
    opened_entry_id: str | None
    closed: bool = False
    binds: dict[str, None] = field(default_factory=dict)
    principals: dict[str, None] = field(default_factory=dict)

    def freeze(self) -> WorkScope:
        return WorkScope(
            id=self.id,
            parent_id=self.parent_id,
            depth=self.depth,
            kind=self.kind,
            label=self.label,
            closed=self.closed,
            opened_entry_id=self.opened_entry_id,
            binds=tuple(self.binds),
            principals=tuple(self.principals),
        )


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def fold_work_scope_map(entries: Iterable[SessionEntry]) -> WorkScopeMap:
    """Fold a branch's ``om.scope.*`` records into its scope map.

    Records are validated when appended; the fold still ignores anything it cannot
    apply (an unknown scope, a leave on an empty stack), so a hand-edited log can never
    make it raise or invent scopes.
    """
    scopes: dict[str, _Mutable] = {
        ROOT_SCOPE_ID: _Mutable(ROOT_SCOPE_ID, None, 0, "session", None, None)
    }
    stack: list[str] = []
    for entry in entries:
        marker = entry.custom_type
        if marker is None or not marker.startswith("om.scope."):
            continue
        data = entry.data or {}
        scope_id = data.get("id") if marker == SCOPE_OPENED else data.get("scopeId")
        if marker == SCOPE_LEFT:
            if stack:
                stack.pop()
            continue
        if not isinstance(scope_id, str):
            continue
        if marker == SCOPE_OPENED:
            parent_id = data.get("parentId") or ROOT_SCOPE_ID
            parent = scopes.get(parent_id) if isinstance(parent_id, str) else None
            if scope_id in scopes or parent is None:
                continue
            kind, label = data.get("kind"), data.get("label")
            scopes[scope_id] = _Mutable(
                scope_id,
                parent.id,
                parent.depth + 1,
                kind if isinstance(kind, str) else None,
                label if isinstance(label, str) else None,
                entry.id,
            )
            continue
        scope = scopes.get(scope_id)
        if scope is None:
            continue
        if marker == SCOPE_CLOSED:
            scope.closed = True
        elif marker == SCOPE_ENTERED:
            stack.append(scope_id)
        elif marker == SCOPE_BOUND:
            for ref in _strings(data.get("refs")):
                scope.binds[ref] = None
        elif marker == SCOPE_UNBOUND:
            for ref in _strings(data.get("refs")):
                scope.binds.pop(ref, None)
        elif marker == SCOPE_GRANTED:
            for principal in _strings(data.get("principalIds")):
                scope.principals[principal] = None
        elif marker == SCOPE_REVOKED:
            for principal in _strings(data.get("principalIds")):
                scope.principals.pop(principal, None)
    return WorkScopeMap({sid: s.freeze() for sid, s in scopes.items()}, tuple(stack))
