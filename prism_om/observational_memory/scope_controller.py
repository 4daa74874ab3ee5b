"""``create_work_scope_controller``: validated writes to the work-scope index.

Every method reads the branch's current scope map (``store.scope_map``), checks the whole
request, and only then appends exactly one ``om.scope.*`` custom entry whose parent is
the current leaf. A request that breaks any rule raises a typed error and appends nothing:

* ``InvalidIdError``: a malformed or reserved scope id, a malformed memory ref;
* ``InvalidSessionIdError``: a principal that is not a valid session id;
* ``LimitExceededError``: 256 scopes, depth 8, stack 8, 4,096 binds or 1,024 principals
  per scope, 512 characters for a label or kind (before and after redaction);
* ``InvalidInputError``: a missing or closed parent or scope, a duplicate scope, leaving
  an empty stack, unbinding an unbound ref, revoking a principal never granted, an empty
  or repeated list;
* ``MemoryRecordError``: a bind ref that names no observation or reflection recorded on
  the branch (an observation ref must name an observation, a reflection ref a reflection);
* ``ScopeDeniedError``: a grant or revoke on the reserved ``session`` root, a grant on a
  closed scope, or an ownership mismatch (a scope this session did not open, or one that
  ``owners`` declares owned by another session).

Calls on one controller are serialised, so two concurrent requests never validate against
the same map and both append.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Protocol, Required, TypedDict, TypeVar, overload

from ..core.redaction import Redactor, redactor
from ..core.scope_map import (
    MAX_BINDS_PER_SCOPE,
    MAX_PRINCIPALS_PER_SCOPE,
    MAX_SCOPE_DEPTH,
    MAX_SCOPE_STACK,
    MAX_SCOPE_TEXT_CHARS,
    MAX_SCOPES,
    ROOT_SCOPE_ID,
    SCOPE_BOUND,
    SCOPE_CLOSED,
    SCOPE_ENTERED,
    SCOPE_GRANTED,
    SCOPE_LEFT,
    SCOPE_OPENED,
    SCOPE_REVOKED,
    SCOPE_UNBOUND,
    WorkScope,
    WorkScopeMap,
    is_scope_id,
    parse_memory_ref,
)
from ..entries import SessionEntry, custom_entry, validate_session_id
from ..errors import (
    InvalidIdError,
    InvalidInputError,
    LimitExceededError,
    MemoryRecordError,
    ScopeDeniedError,
)
from ..stores.base import SessionStore

__all__ = [
    "AppendEntry",
    "SessionLike",
    "WorkScopeController",
    "WorkScopeSpec",
    "check_scope_id",
    "create_work_scope_controller",
    "with_work_scope",
]

AppendEntry = Callable[[SessionEntry], Awaitable[Any]]
"""The host's append callback, bound to one store and session (usually ``session.append``)."""


class SessionLike(Protocol):
    """What the controller needs of a session: its store and id (``prism_om.Session``)."""

    @property
    def store(self) -> SessionStore: ...

    @property
    def id(self) -> str: ...


def check_scope_id(scope_id: object, *, what: str = "scope id") -> str:
    """``scope_id`` when well formed, else ``InvalidIdError``."""
    if not is_scope_id(scope_id):
        raise InvalidIdError(
            f"invalid {what} {scope_id!r}: use 1-128 characters of [A-Za-z0-9._:/-], no '..'"
        )
    assert isinstance(scope_id, str)
    return scope_id


class WorkScopeController:
    """Opens, closes, enters, leaves, binds and grants work scopes of one session."""

    def __init__(
        self,
        session: SessionLike,
        append_entry: AppendEntry,
        *,
        secrets: Iterable[str] | Redactor | None = None,
        owners: Mapping[str, str] | None = None,
    ) -> None:
        self.session = session
        self._append_entry = append_entry
        self._redactor = redactor(secrets)
        self._owners = dict(owners or {})
        for scope_id, owner in self._owners.items():
            check_scope_id(scope_id)
            validate_session_id(owner)
        self._lock = asyncio.Lock()

    async def scope_map(self) -> WorkScopeMap:
        """The session's current scope map."""
        return await self.session.store.scope_map(self.session.id)

    # -- the eight operations --------------------------------------------------------------

    async def open(
        self,
        scope_id: str,
        *,
        parent_id: str | None = None,
        kind: str | None = None,
        label: str | None = None,
    ) -> SessionEntry:
        """Open a scope under ``parent_id`` (default: the ``session`` root)."""
        async with self._lock:
            scopes = await self.scope_map()
            check_scope_id(scope_id)
            if scope_id == ROOT_SCOPE_ID:
                raise InvalidIdError(f"scope id {ROOT_SCOPE_ID!r} is reserved for the root")
            if scope_id in scopes.scopes:
                raise InvalidInputError(f"scope {scope_id!r} is already open on this branch")
            parent = self._open_scope(scopes, parent_id or ROOT_SCOPE_ID, what="parent scope")
            if parent.depth + 1 > MAX_SCOPE_DEPTH:
                raise LimitExceededError(
                    f"scope {scope_id!r} would sit at depth {parent.depth + 1}, "
                    f"above the cap of {MAX_SCOPE_DEPTH}"
                )
            if len(scopes.scopes) - 1 >= MAX_SCOPES:
                raise LimitExceededError(f"a branch holds at most {MAX_SCOPES} scopes")
            data: dict[str, Any] = {"type": SCOPE_OPENED, "id": scope_id}
            if parent.id != ROOT_SCOPE_ID:
                data["parentId"] = parent.id
            for key, value in (("kind", kind), ("label", label)):
                if value is not None:
                    data[key] = self._scope_text(key, value)
            return await self._append(data)

    async def close(self, scope_id: str) -> SessionEntry:
        """Close a scope for good: it can no longer be entered, bound to or granted."""
        async with self._lock:
            scope = self._open_scope(await self.scope_map(), scope_id, host=True)
            return await self._append({"type": SCOPE_CLOSED, "scopeId": scope.id})

    async def enter(self, scope_id: str) -> SessionEntry:
        """Push an open scope on the stack: new memory binds to it."""
        async with self._lock:
            scopes = await self.scope_map()
            scope = self._open_scope(scopes, scope_id, host=True)
            if len(scopes.stack) >= MAX_SCOPE_STACK:
                raise LimitExceededError(f"the scope stack holds at most {MAX_SCOPE_STACK} scopes")
            return await self._append({"type": SCOPE_ENTERED, "scopeId": scope.id})

    async def leave(self) -> SessionEntry:
        """Pop the scope stack."""
        async with self._lock:
            if not (await self.scope_map()).stack:
                raise InvalidInputError("no scope is entered: the stack is empty")
            return await self._append({"type": SCOPE_LEFT})

    async def bind(self, scope_id: str, refs: Sequence[str]) -> SessionEntry:
        """Bind recorded observations (``om:<id>``) or reflections (``reflection:<id>``)."""
        async with self._lock:
            scopes = await self.scope_map()
            scope = self._open_scope(scopes, scope_id)
            wanted = _unique(refs, "refs")
            await self._check_recorded(wanted)
            total = len(set(scope.binds) | set(wanted))
            if total > MAX_BINDS_PER_SCOPE:
                raise LimitExceededError(
                    f"scope {scope_id!r} would hold {total} binds, above the cap of "
                    f"{MAX_BINDS_PER_SCOPE}"
                )
            return await self._append({"type": SCOPE_BOUND, "scopeId": scope.id, "refs": wanted})

    async def unbind(self, scope_id: str, refs: Sequence[str]) -> SessionEntry:
        """Remove binds; every ref must be bound to the scope now."""
        async with self._lock:
            scope = self._known_scope(await self.scope_map(), scope_id)
            wanted = _unique(refs, "refs")
            for ref in wanted:
                if parse_memory_ref(ref) is None:
                    raise InvalidIdError(f"invalid memory ref {ref!r}")
                if ref not in scope.binds:
                    raise InvalidInputError(f"{ref!r} is not bound to scope {scope_id!r}")
            return await self._append({"type": SCOPE_UNBOUND, "scopeId": scope.id, "refs": wanted})

    async def grant(self, scope_id: str, principal_ids: Sequence[str]) -> SessionEntry:
        """Grant sessions read and write access to a scope this session owns."""
        async with self._lock:
            scope = self._owned_scope(await self.scope_map(), scope_id, "grant")
            if scope.closed:
                raise ScopeDeniedError(
                    f"scope {scope_id!r} is closed: it cannot be granted",
                    session_id=self.session.id,
                )
            wanted = [validate_session_id(p) for p in _unique(principal_ids, "principal_ids")]
            total = len(set(scope.principals) | set(wanted))
            if total > MAX_PRINCIPALS_PER_SCOPE:
                raise LimitExceededError(
                    f"scope {scope_id!r} would grant {total} principals, above the cap of "
                    f"{MAX_PRINCIPALS_PER_SCOPE}"
                )
            return await self._append(
                {"type": SCOPE_GRANTED, "scopeId": scope.id, "principalIds": wanted}
            )

    async def revoke(self, scope_id: str, principal_ids: Sequence[str]) -> SessionEntry:
        """Withdraw grants; allowed on a closed scope, since withdrawing is always safe."""
        async with self._lock:
            scope = self._owned_scope(await self.scope_map(), scope_id, "revoke")
            wanted = [validate_session_id(p) for p in _unique(principal_ids, "principal_ids")]
            for principal in wanted:
                if principal not in scope.principals:
                    raise InvalidInputError(
                        f"{principal!r} holds no grant on scope {scope_id!r} to revoke"
                    )
            return await self._append(
                {"type": SCOPE_REVOKED, "scopeId": scope.id, "principalIds": wanted}
            )

    # -- checks ----------------------------------------------------------------------------

    def _known_scope(self, scopes: WorkScopeMap, scope_id: str, what: str = "scope") -> WorkScope:
        check_scope_id(scope_id, what=f"{what} id")
        scope = scopes.scopes.get(scope_id)
        if scope is None:
            raise InvalidInputError(f"{what} {scope_id!r} is not open on this branch")
        return scope

    def _open_scope(
        self, scopes: WorkScopeMap, scope_id: str, *, what: str = "scope", host: bool = False
    ) -> WorkScope:
        scope = self._known_scope(scopes, scope_id, what)
        if host and scope.is_root:
            raise InvalidIdError(
                f"{ROOT_SCOPE_ID!r} is the implicit root: it is never entered or closed"
            )
        if scope.closed:
            raise InvalidInputError(f"{what} {scope_id!r} is closed")
        return scope

    def _owned_scope(self, scopes: WorkScopeMap, scope_id: str, action: str) -> WorkScope:
        check_scope_id(scope_id)
        if scope_id == ROOT_SCOPE_ID:
            raise ScopeDeniedError(
                f"cannot {action} on the reserved {ROOT_SCOPE_ID!r} root",
                session_id=self.session.id,
            )
        owner = self._owners.get(scope_id)
        if owner is not None and owner != self.session.id:
            raise ScopeDeniedError(
                f"cannot {action} on scope {scope_id!r}: it is owned by session {owner!r}",
                session_id=self.session.id,
            )
        scope = scopes.scopes.get(scope_id)
        if scope is None:
            raise ScopeDeniedError(
                f"cannot {action} on scope {scope_id!r}: "
                f"session {self.session.id!r} did not open it",
                session_id=self.session.id,
            )
        return scope

    async def _check_recorded(self, refs: Sequence[str]) -> None:
        ledger = await self.session.store.ledger(self.session.id)
        for ref in refs:
            parsed = parse_memory_ref(ref)
            if parsed is None:
                raise InvalidIdError(
                    f"invalid memory ref {ref!r}: use om:<12-hex> or reflection:<12-hex>"
                )
            kind, memory_id = parsed
            known = ledger.observations_by_id if kind == "observation" else ledger.reflections_by_id
            if memory_id not in known:
                raise MemoryRecordError(
                    f"{ref!r} names no {kind} recorded on this branch",
                    memory_id=memory_id,
                    session_id=self.session.id,
                )

    def _scope_text(self, key: str, value: object) -> str:
        if not isinstance(value, str):
            raise InvalidInputError(f"{key} must be a string, got {type(value).__name__}")
        redacted = self._redactor.text(value)
        # Both lengths: a short secret's marker can make the stored text longer.
        if max(len(value), len(redacted)) > MAX_SCOPE_TEXT_CHARS:
            raise LimitExceededError(
                f"a scope {key} holds at most {MAX_SCOPE_TEXT_CHARS} characters"
            )
        return redacted

    async def _append(self, data: dict[str, Any]) -> SessionEntry:
        entry = custom_entry(
            self.session.id, data, parent_id=await self.session.store.leaf(self.session.id)
        )
        await self._append_entry(entry)
        # An append at the leaf may have chosen another parent: return what was stored.
        stored = await self.session.store.get(entry.id)
        return stored if stored is not None else entry


def _unique(values: Sequence[str], what: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidInputError(f"{what} must be a list of strings")
    items = list(values)
    if not all(isinstance(v, str) for v in items):
        raise InvalidInputError(f"{what} must be a list of strings")
    if not items:
        raise InvalidInputError(f"{what} must not be empty")
    if len(set(items)) != len(items):
        raise InvalidInputError(f"{what} lists a value twice")
    return items


def create_work_scope_controller(
    *,
    session: SessionLike,
    append_entry: AppendEntry,
    secrets: Iterable[str] | Redactor | None = None,
    owners: Mapping[str, str] | None = None,
) -> WorkScopeController:
    """A controller over ``session``'s scope index; ``owners`` maps scope id → owner session."""
    return WorkScopeController(session, append_entry, secrets=secrets, owners=owners)


class WorkScopeSpec(TypedDict, total=False):
    """The scope ``with_work_scope`` opens when missing (``id`` is required)."""

    id: Required[str]
    parent_id: str | None
    kind: str | None
    label: str | None


class _EnteredScope:
    """``async with``: open when missing, enter, and always restore the stack (never close)."""

    def __init__(self, controller: WorkScopeController, spec: WorkScopeSpec) -> None:
        if not isinstance(spec, Mapping) or "id" not in spec:
            raise InvalidInputError("a work scope spec needs an 'id'")
        unknown = set(spec) - {"id", "parent_id", "kind", "label"}
        if unknown:
            raise InvalidInputError(f"unknown work scope spec keys: {sorted(unknown)}")
        self._controller = controller
        self._spec = spec
        self._before: tuple[str, ...] = ()

    async def __aenter__(self) -> str:
        spec, controller = self._spec, self._controller
        scopes = await controller.scope_map()
        if spec["id"] not in scopes.scopes:
            await controller.open(
                spec["id"],
                parent_id=spec.get("parent_id"),
                kind=spec.get("kind"),
                label=spec.get("label"),
            )
        await controller.enter(spec["id"])
        self._before = scopes.stack
        return spec["id"]

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        before, mine = self._before, (*self._before, self._spec["id"])
        stack = (await self._controller.scope_map()).stack
        # Restore the caller's stack exactly, whatever the body did: pop down to the
        # longest prefix it still shares with the caller's stack, then re-enter whatever
        # of the caller's scopes the body left, so the caller never finds itself (and its
        # new memory) bound to a scope it did not choose.
        kept = 0
        while kept < min(len(stack), len(before)) and stack[kept] == before[kept]:
            kept += 1
        for _ in range(len(stack) - kept):
            await self._controller.leave()
        for scope_id in before[kept:]:
            await self._controller.enter(scope_id)
        if stack != mine and exc is None:
            raise InvalidInputError(
                f"scope stack unbalanced: expected {self._spec['id']!r} on top, got {stack!r}; "
                f"restored to {before!r}"
            )


_T = TypeVar("_T")


@overload
def with_work_scope(
    controller: WorkScopeController, spec: WorkScopeSpec, fn: None = None
) -> AbstractAsyncContextManager[str]: ...


@overload
def with_work_scope(
    controller: WorkScopeController, spec: WorkScopeSpec, fn: Callable[[], Awaitable[_T]]
) -> Awaitable[_T]: ...


def with_work_scope(
    controller: WorkScopeController,
    spec: WorkScopeSpec,
    fn: Callable[[], Awaitable[_T]] | None = None,
) -> AbstractAsyncContextManager[str] | Awaitable[_T]:
    """Open ``spec`` if missing, enter it, run ``fn`` (or the ``async with`` body), leave.

    The scope is left in ``finally`` and never closed: the stack is put back exactly as it
    was before entering, whatever the body entered or left (scopes it entered are left,
    the caller's scopes it left are re-entered). Then the body's error propagates, or, if
    the body finished with a stack other than this scope on top of the caller's, an
    ``InvalidInputError`` is raised after restoring. ``async with`` yields the scope id;
    ``await with_work_scope(controller, spec, fn)`` returns what ``fn`` returns.
    """
    context = _EnteredScope(controller, spec)
    if fn is None:
        return context
    return _run(context, fn)


async def _run(context: _EnteredScope, fn: Callable[[], Awaitable[_T]]) -> _T:
    async with context:
        return await fn()
