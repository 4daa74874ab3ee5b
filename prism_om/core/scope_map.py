"""The opt-in work-scope index: ``om.scope.*`` records and their fold.

A work scope is a host-named node in a tree under the implicit ``session`` root. Scopes
are opened, closed, entered and left (a stack), memory ids are bound to them many-to-many
(``om:<12-hex>`` for observations, ``reflection:<12-hex>`` for reflections), and a scope's
owner can grant other sessions (principals, which are session ids) read and write access.
Memory bound to no scope belongs to the root.

Wire records (``data``; ``type`` omitted)::

    om.scope.opened    {id, parentId?, kind?, label?}   parentId absent = the root
    om.scope.closed    {scopeId}
    om.scope.entered   {scopeId}
    om.scope.left      {}
    om.scope.bound     {scopeId, refs}
    om.scope.unbound   {scopeId, refs}
    om.scope.granted   {scopeId, principalIds}
    om.scope.revoked   {scopeId, principalIds}

The controller validates every record before it appends it; the fold still ignores
whatever it cannot apply, so a hand-written log can never make it raise, invent scopes or
break a cap. Fold rules, in branch order:

* opened: a well-formed, unreserved, new id under an existing open parent, at most
  ``MAX_SCOPE_DEPTH`` deep and at most ``MAX_SCOPES`` host scopes;
* closed: any host scope (closing is final; a closed scope stays in the map);
* entered: an open host scope while the stack is below ``MAX_SCOPE_STACK``; left: pops;
* bound: well-formed refs on an open scope (the root included), up to
  ``MAX_BINDS_PER_SCOPE``; unbound: removes refs from any scope;
* granted: valid session ids on an open host scope, up to ``MAX_PRINCIPALS_PER_SCOPE``;
  revoked: removes them from any host scope and remembers them as revoked.

The result is a plain ``==``-comparable value, so an indexed store can rebuild it from
fold rows and be checked against this reference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..entries import SESSION_ID_PATTERN, SessionEntry
from ..ids import MEMORY_ID_PATTERN

__all__ = [
    "MAX_BINDS_PER_SCOPE",
    "MAX_PRINCIPALS_PER_SCOPE",
    "MAX_SCOPES",
    "MAX_SCOPE_DEPTH",
    "MAX_SCOPE_STACK",
    "MAX_SCOPE_TEXT_CHARS",
    "ROOT_SCOPE_ID",
    "SCOPE_BOUND",
    "SCOPE_CLOSED",
    "SCOPE_ENTERED",
    "SCOPE_GRANTED",
    "SCOPE_ID_PATTERN",
    "SCOPE_LEFT",
    "SCOPE_OPENED",
    "SCOPE_REVOKED",
    "SCOPE_UNBOUND",
    "MemoryRefKind",
    "WorkScope",
    "WorkScopeMap",
    "fold_work_scope_map",
    "is_principal_id",
    "is_scope_id",
    "memory_ref",
    "parse_memory_ref",
]

ROOT_SCOPE_ID: Final = "session"
ROOT_SCOPE_KIND: Final = "session"
SCOPE_ID_PATTERN = re.compile(r"^[A-Za-z0-9._:/-]{1,128}$")
MAX_SCOPES: Final = 256
"""Host scopes per branch (the implicit root is not counted)."""
MAX_SCOPE_DEPTH: Final = 8
"""Depth of the deepest host scope; children of the root have depth 1."""
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

MemoryRefKind = Literal["observation", "reflection"]
_REF = re.compile(r"^(om|reflection):([a-f0-9]{12})$")


def is_scope_id(value: object) -> bool:
    """True for a well-formed scope id (``[A-Za-z0-9._:/-]{1,128}`` without ``..``)."""
    return isinstance(value, str) and bool(SCOPE_ID_PATTERN.fullmatch(value)) and ".." not in value


def is_principal_id(value: object) -> bool:
    """True for a principal: a valid session id."""
    return (
        isinstance(value, str) and bool(SESSION_ID_PATTERN.fullmatch(value)) and ".." not in value
    )


def parse_memory_ref(ref: object) -> tuple[MemoryRefKind, str] | None:
    """``("observation" | "reflection", id)`` for a bind ref, None when malformed."""
    if not isinstance(ref, str):
        return None
    match = _REF.fullmatch(ref)
    if match is None or not MEMORY_ID_PATTERN.fullmatch(match.group(2)):
        return None
    return ("observation" if match.group(1) == "om" else "reflection", match.group(2))


def memory_ref(kind: MemoryRefKind, memory_id: str) -> str:
    """The bind ref of an observation (``om:<id>``) or a reflection (``reflection:<id>``)."""
    return f"{'om' if kind == 'observation' else 'reflection'}:{memory_id}"


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
    """Bound refs in first-bind order."""
    principals: tuple[str, ...] = ()
    """Currently granted session ids in first-grant order."""
    revoked_principals: tuple[str, ...] = ()
    """Session ids whose latest grant record on this scope is a revoke."""

    @property
    def is_root(self) -> bool:
        return self.parent_id is None


def _root() -> dict[str, WorkScope]:
    return {ROOT_SCOPE_ID: WorkScope(ROOT_SCOPE_ID, None, 0, ROOT_SCOPE_KIND)}


@dataclass(frozen=True)
class WorkScopeMap:
    """The folded scope index of one branch; ``scopes`` is in opening order, root first."""

    scopes: Mapping[str, WorkScope] = field(default_factory=_root)
    stack: tuple[str, ...] = ()

    @property
    def current(self) -> str:
        """The scope new memory is bound to: the top of the stack, else the root."""
        return self.stack[-1] if self.stack else ROOT_SCOPE_ID

    @property
    def has_host_scopes(self) -> bool:
        """True once any scope besides the implicit root was opened."""
        return len(self.scopes) > 1

    @property
    def root(self) -> WorkScope:
        return self.scopes[ROOT_SCOPE_ID]

    def ancestors(self, scope_id: str) -> list[str]:
        """Parents of ``scope_id`` from the nearest up to the root."""
        chain: list[str] = []
        scope = self.scopes.get(scope_id)
        while scope is not None and scope.parent_id is not None:
            chain.append(scope.parent_id)
            scope = self.scopes.get(scope.parent_id)
        return chain

    def children(self, scope_id: str) -> list[str]:
        """Direct children of ``scope_id``, in opening order."""
        return [s.id for s in self.scopes.values() if s.parent_id == scope_id]

    def descendants(self, scope_id: str) -> list[str]:
        """Every scope below ``scope_id``, in opening order."""
        # A parent is always opened before its children, so one pass in opening order works.
        found: list[str] = []
        wanted = {scope_id}
        for scope in self.scopes.values():
            if scope.parent_id in wanted:
                found.append(scope.id)
                wanted.add(scope.id)
        return found

    def scopes_of(self, ref: str) -> list[str]:
        """Scopes a ref is bound to; the root alone when it is bound nowhere."""
        bound = [s.id for s in self.scopes.values() if ref in s.binds]
        return bound or [ROOT_SCOPE_ID]

    def refs_by_scope(self) -> dict[str, frozenset[str]]:
        """Each scope's bound refs, for membership checks over many refs."""
        return {sid: frozenset(s.binds) for sid, s in self.scopes.items()}


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
    revoked: dict[str, None] = field(default_factory=dict)

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
            revoked_principals=tuple(self.revoked),
        )


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class _Folder:
    """Applies scope records one at a time (see the module docstring for the rules)."""

    def __init__(self) -> None:
        self.scopes: dict[str, _Mutable] = {
            ROOT_SCOPE_ID: _Mutable(ROOT_SCOPE_ID, None, 0, ROOT_SCOPE_KIND, None, None)
        }
        self.stack: list[str] = []

    def add(self, entry: SessionEntry) -> None:
        marker = entry.custom_type
        if marker is None or not marker.startswith("om.scope."):
            return
        data = entry.data or {}
        if marker == SCOPE_LEFT:
            if self.stack:
                self.stack.pop()
        elif marker == SCOPE_OPENED:
            self._open(entry.id, data)
        else:
            scope = self.scopes.get(data.get("scopeId"))  # type: ignore[arg-type]
            if scope is not None:
                self._apply(marker, scope, data)

    def _open(self, entry_id: str, data: Mapping[str, Any]) -> None:
        scope_id = data.get("id")
        parent_id = data.get("parentId", ROOT_SCOPE_ID)
        parent = self.scopes.get(parent_id) if isinstance(parent_id, str) else None
        if (
            not is_scope_id(scope_id)
            or scope_id == ROOT_SCOPE_ID
            or scope_id in self.scopes
            or parent is None
            or parent.closed
            or parent.depth + 1 > MAX_SCOPE_DEPTH
            or len(self.scopes) - 1 >= MAX_SCOPES
        ):
            return
        assert isinstance(scope_id, str)
        self.scopes[scope_id] = _Mutable(
            scope_id,
            parent.id,
            parent.depth + 1,
            _text(data.get("kind")),
            _text(data.get("label")),
            entry_id,
        )

    def _apply(self, marker: str, scope: _Mutable, data: Mapping[str, Any]) -> None:
        host = scope.parent_id is not None
        if marker == SCOPE_CLOSED and host:
            scope.closed = True
        elif marker == SCOPE_ENTERED:
            if host and not scope.closed and len(self.stack) < MAX_SCOPE_STACK:
                self.stack.append(scope.id)
        elif marker == SCOPE_BOUND and not scope.closed:
            for ref in _strings(data.get("refs")):
                if len(scope.binds) < MAX_BINDS_PER_SCOPE and parse_memory_ref(ref):
                    scope.binds[ref] = None
        elif marker == SCOPE_UNBOUND:
            for ref in _strings(data.get("refs")):
                scope.binds.pop(ref, None)
        elif marker == SCOPE_GRANTED and host and not scope.closed:
            for principal in _strings(data.get("principalIds")):
                if is_principal_id(principal) and (
                    principal in scope.principals
                    or len(scope.principals) < MAX_PRINCIPALS_PER_SCOPE
                ):
                    scope.principals[principal] = None
                    scope.revoked.pop(principal, None)
        elif marker == SCOPE_REVOKED and host:
            for principal in _strings(data.get("principalIds")):
                if principal in scope.principals:
                    del scope.principals[principal]
                    scope.revoked[principal] = None

    def build(self) -> WorkScopeMap:
        return WorkScopeMap({sid: s.freeze() for sid, s in self.scopes.items()}, tuple(self.stack))


def fold_work_scope_map(entries: Iterable[SessionEntry]) -> WorkScopeMap:
    """Fold a branch's ``om.scope.*`` records (root first) into its scope map. O(n), pure."""
    folder = _Folder()
    for entry in entries:
        folder.add(entry)
    return folder.build()
