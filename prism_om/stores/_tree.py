"""An in-process index of session trees: the reference the other adapters must equal.

The memory adapter is this index alone; the JSONL adapter keeps one in step with its
files. Validation happens in ``check`` before ``apply`` touches anything, so a rejected
batch leaves the index exactly as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..entries import SessionEntry
from ..errors import (
    DuplicateEntryError,
    EntryNotFoundError,
    RootExistsError,
    SessionMismatchError,
    UnknownParentError,
)
from ..observational_memory.records import OBSERVATIONS_RECORDED, REFLECTIONS_RECORDED
from ..observational_memory.sources import is_eligible_observation_source_entry
from ..observational_memory.validation import (
    BranchFacts,
    MemoryRecordNeeds,
    memory_record_needs,
    validate_memory_record,
)
from .base import SessionSummary

__all__ = ["TreeIndex"]


@dataclass
class _SessionTree:
    order: list[str] = field(default_factory=list)
    root: str | None = None
    leaf: str | None = None
    # Kept by ``apply`` so a session's summary costs nothing to read.
    messages: int = 0
    leaf_count: int = 0
    last_activity: str | None = None


class TreeIndex:
    """Entries by id, per-session append order, children, depth and the current leaf."""

    def __init__(self) -> None:
        self.entries: dict[str, SessionEntry] = {}
        self.children: dict[str, list[str]] = {}
        self.depth: dict[str, int] = {}
        self.trees: dict[str, _SessionTree] = {}
        # memory id -> entries that recorded it (any branch); "recorded on this branch" is
        # then an ancestor test per recorder instead of a scan of the branch.
        self.recorders: dict[str, list[tuple[str, str]]] = {}

    # -- writes ------------------------------------------------------------------------

    def check(self, batch: Sequence[SessionEntry]) -> None:
        """Raise the store error the batch breaks, touching nothing."""
        if not batch:
            return
        session_id = batch[0].session_id
        tree = self.trees.get(session_id)
        has_root = tree is not None and tree.root is not None
        pending: dict[str, SessionEntry] = {}
        view = _PendingView(self, pending)
        for entry in batch:
            if entry.id in self.entries:
                raise DuplicateEntryError(f"entry id {entry.id!r} already exists in the store")
            if entry.parent_id is None:
                if has_root:
                    root = tree.root if tree else None
                    raise RootExistsError(
                        f"entry {entry.id!r} has no parent, but session {session_id!r} "
                        f"already has its root {root!r}"
                    )
                has_root = True
            elif entry.parent_id not in pending:
                parent = self.entries.get(entry.parent_id)
                if parent is None:
                    raise UnknownParentError(
                        f"entry {entry.id!r} names parent {entry.parent_id!r}, "
                        "which is not in the store"
                    )
                if parent.session_id != session_id:
                    raise SessionMismatchError(
                        f"entry {entry.id!r} of session {session_id!r} names parent "
                        f"{entry.parent_id!r} of session {parent.session_id!r}"
                    )
            view.add_depth(entry)
            needs = memory_record_needs(entry)
            if needs is not None:
                validate_memory_record(entry, needs, view.facts(entry.parent_id, needs))
            pending[entry.id] = entry
            view.note_recorder(entry)

    def apply(self, batch: Sequence[SessionEntry]) -> None:
        """Add an already checked batch and move the session's leaf to its last entry."""
        for entry in batch:
            tree = self.trees.get(entry.session_id)
            if tree is None:
                tree = self.trees[entry.session_id] = _SessionTree()
            self.entries[entry.id] = entry
            self.children[entry.id] = []
            for memory_id, kind in recorded_memory_ids(entry):
                self.recorders.setdefault(memory_id, []).append((entry.id, kind))
            tree.order.append(entry.id)
            tree.leaf_count += 1
            if entry.kind == "message":
                tree.messages += 1
            if tree.last_activity is None or entry.timestamp > tree.last_activity:
                tree.last_activity = entry.timestamp
            if entry.parent_id is None:
                tree.root = entry.id
                self.depth[entry.id] = 0
            else:
                siblings = self.children[entry.parent_id]
                if not siblings:
                    tree.leaf_count -= 1  # the parent was a leaf until now
                siblings.append(entry.id)
                self.depth[entry.id] = self.depth[entry.parent_id] + 1
            tree.leaf = entry.id

    def drop_session(self, session_id: str) -> None:
        """Forget a session's entries (a lazily loaded session found damaged)."""
        tree = self.trees.pop(session_id, None)
        if tree is None:
            return
        for entry_id in tree.order:
            entry = self.entries.pop(entry_id)
            self.children.pop(entry_id, None)
            self.depth.pop(entry_id, None)
            for memory_id, kind in recorded_memory_ids(entry):
                found = self.recorders.get(memory_id, [])
                if (entry_id, kind) in found:
                    found.remove((entry_id, kind))
                if not found:
                    self.recorders.pop(memory_id, None)

    def resolve_leaf(self, session_id: str, entry_id: str) -> str:
        """Check that ``entry_id`` is an entry of the session and return it."""
        entry = self.entries.get(entry_id)
        if entry is None:
            raise EntryNotFoundError(f"entry {entry_id!r} is not in the store")
        if entry.session_id != session_id:
            raise SessionMismatchError(
                f"entry {entry_id!r} belongs to session {entry.session_id!r}, not {session_id!r}"
            )
        return entry_id

    # -- reads -------------------------------------------------------------------------

    def session_entries(self, session_id: str) -> list[SessionEntry]:
        tree = self.trees.get(session_id)
        return [self.entries[i] for i in tree.order] if tree else []

    def leaf(self, session_id: str) -> str | None:
        tree = self.trees.get(session_id)
        return tree.leaf if tree else None

    def leaves(self, session_id: str) -> list[str]:
        tree = self.trees.get(session_id)
        return [i for i in tree.order if not self.children[i]] if tree else []

    def summary(self, session_id: str) -> SessionSummary:
        tree = self.trees.get(session_id)
        if tree is None:
            return SessionSummary(session_id, 0, 0, 0, None)
        entries, last = len(tree.order), tree.last_activity
        return SessionSummary(session_id, entries, tree.messages, tree.leaf_count, last)

    def path_ids(self, session_id: str, leaf_id: str | None) -> list[str]:
        """Ids from the root to the leaf (default: the current leaf), root first."""
        if leaf_id is None:
            leaf_id = self.leaf(session_id)
            if leaf_id is None:
                return []
        else:
            self.resolve_leaf(session_id, leaf_id)
        path: list[str] = []
        current: str | None = leaf_id
        while current is not None:
            path.append(current)
            current = self.entries[current].parent_id
        path.reverse()
        return path

    def branch(self, session_id: str, leaf_id: str | None) -> list[SessionEntry]:
        return [self.entries[i] for i in self.path_ids(session_id, leaf_id)]

    def is_on_branch(self, session_id: str, entry_id: str, leaf_id: str | None) -> bool:
        """Ancestor test by depth: walk up from the leaf only as far as the entry's depth."""
        if leaf_id is None:
            leaf_id = self.leaf(session_id)
            if leaf_id is None:
                return False
        else:
            self.resolve_leaf(session_id, leaf_id)
        target = self.entries.get(entry_id)
        if target is None or target.session_id != session_id:
            return False
        want = self.depth[entry_id]
        current = leaf_id
        if self.depth[current] < want:
            return False
        while self.depth[current] > want:
            parent = self.entries[current].parent_id
            assert parent is not None  # depth > 0 means a parent exists
            current = parent
        return current == entry_id


def recorded_memory_ids(entry: SessionEntry) -> list[tuple[str, str]]:
    """``(memory id, "observation" | "reflection")`` pairs an entry records."""
    marker = entry.custom_type
    if marker not in (OBSERVATIONS_RECORDED, REFLECTIONS_RECORDED) or entry.data is None:
        return []
    key, kind = (
        ("observations", "observation")
        if marker == OBSERVATIONS_RECORDED
        else ("reflections", "reflection")
    )
    items = entry.data.get(key)
    if not isinstance(items, list):
        return []
    return [(i["id"], kind) for i in items if isinstance(i, dict) and isinstance(i.get("id"), str)]


class _PendingView:
    """The index plus the checked part of a batch, for branch questions during ``check``.

    Ancestor tests walk parent links only from the parent down to the candidate's depth,
    so validating a record that cites recent messages costs a few steps, not the branch.
    """

    def __init__(self, index: TreeIndex, pending: dict[str, SessionEntry]) -> None:
        self.index = index
        self.pending = pending
        self.depth: dict[str, int] = {}
        self.recorders: dict[str, list[tuple[str, str]]] = {}

    def add_depth(self, entry: SessionEntry) -> None:
        parent = entry.parent_id
        self.depth[entry.id] = 0 if parent is None else self.depth_of(parent) + 1

    def note_recorder(self, entry: SessionEntry) -> None:
        for memory_id, kind in recorded_memory_ids(entry):
            self.recorders.setdefault(memory_id, []).append((entry.id, kind))

    def entry(self, entry_id: str) -> SessionEntry | None:
        return self.pending.get(entry_id) or self.index.entries.get(entry_id)

    def depth_of(self, entry_id: str) -> int:
        found = self.depth.get(entry_id)
        return self.index.depth[entry_id] if found is None else found

    def is_ancestor(self, candidate: str, tip: str | None) -> bool:
        """True when ``candidate`` is ``tip`` or one of its ancestors."""
        if tip is None or self.entry(candidate) is None:
            return False
        want = self.depth_of(candidate)
        current: str | None = tip
        while current is not None and self.depth_of(current) > want:
            node = self.entry(current)
            current = node.parent_id if node is not None else None
        return current == candidate

    def facts(self, parent_id: str | None, needs: MemoryRecordNeeds) -> BranchFacts:
        eligible = {
            s
            for s in needs.source_entry_ids
            if (e := self.entry(s)) is not None
            and is_eligible_observation_source_entry(e)
            and self.is_ancestor(s, parent_id)
        }
        covered = {c for c in needs.covered_entry_ids if self.is_ancestor(c, parent_id)}
        observations: set[str] = set()
        reflections: set[str] = set()
        for memory_id in needs.memory_ids_to_look_up:
            found = [
                *self.index.recorders.get(memory_id, ()),
                *self.recorders.get(memory_id, ()),
            ]
            for recorder, kind in found:
                if self.is_ancestor(recorder, parent_id):
                    (observations if kind == "observation" else reflections).add(memory_id)
        return BranchFacts(
            eligible_source_ids=frozenset(eligible),
            entry_ids_on_branch=frozenset(covered),
            recorded_observation_ids=frozenset(observations),
            recorded_reflection_ids=frozenset(reflections),
        )
