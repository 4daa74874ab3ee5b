"""An in-process index of session trees: the reference the other adapters must equal.

The memory adapter is this index alone; the JSONL adapter keeps one in step with its
files. Validation happens in ``check`` before ``apply`` touches anything, so a rejected
batch leaves the index exactly as it was.

Branch membership uses the segment shape of docs/design.md ("The store architecture"),
as the SQLite adapter does: every entry has a ``depth`` and a ``segment`` (a maximal chain
of first children); a fork starts a new segment that remembers its parent segment and the
depth it starts at. The path from the root to a tip is then one piece per fork, and "is X
on this path" is X's segment looked up among those pieces: O(1) per id once the pieces
down to X's depth are known, instead of a walk of parent links per id.

The same pieces serve the per-turn reads: each segment keeps its entry ids in depth order
and the depths of its eligible messages, so a page, the recent messages and the recorders
of a memory id are found in O(pieces + answer) (a bisect per piece), not by reading the
branch.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ...core.ledger import LedgerBuilder, ObservationalMemoryLedger
from ...core.ledger_views import restrict_ledger
from ...core.records import (
    FOLDED_TYPE,
    OBSERVATIONS_DROPPED,
    OBSERVATIONS_RECORDED,
    REFLECTIONS_RECORDED,
    is_memory_record,
)
from ...core.sources import is_eligible_observation_source_entry
from ...core.timestamps import utc_timestamp
from ...core.validation import (
    BranchFacts,
    MemoryRecordNeeds,
    memory_record_needs,
    validate_memory_record,
)
from ...entries import SessionEntry
from ...errors import (
    DuplicateEntryError,
    EntryNotFoundError,
    InvalidInputError,
    MemoryRecordError,
    RootExistsError,
    SessionMismatchError,
    UnknownParentError,
)
from ..base import SessionSummary
from .lazy_entries import LazyEntries, pop_entry

__all__ = ["PathMembership", "TreeIndex"]


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

    def __init__(self, url: str | None = None) -> None:
        # The owning store's URL, carried by the errors the rule checks raise.
        self.url = url
        self.entries: dict[str, SessionEntry] = {}
        # Only entries with a child are keys (a leaf has none): one list fewer per entry.
        self.children: dict[str, list[str]] = {}
        self.depth: dict[str, int] = {}
        self.segment: dict[str, int] = {}
        # Per segment id (a list index): the segment it forked from and its first depth.
        self.segment_parent: list[int | None] = []
        self.segment_start: list[int] = []
        # Per segment: its entry ids by depth (index = depth - start), and the depths of
        # its eligible messages, ascending: what the page and recent reads bisect.
        self.segment_ids: list[list[str]] = []
        self.segment_messages: list[list[int]] = []
        self.trees: dict[str, _SessionTree] = {}
        # memory id -> entries that recorded it (any branch); "recorded on this branch" is
        # then an ancestor test per recorder instead of a scan of the branch.
        self.recorders: dict[str, list[tuple[str, str]]] = {}
        # memory id -> entries that drop it (dropper records, folded compactions), so a
        # memory subset reads the records of its ids only.
        self.droppers: dict[str, list[str]] = {}
        # reflection id -> entries whose reflections supersede it (any branch), for the
        # "superseded once on this branch" rule.
        self.superseders: dict[str, list[str]] = {}
        # entry id -> the newest memory record on the path to it (itself included), kept
        # at append so a compare-and-append reads the head in O(1) at any branch length.
        self.memory_heads: dict[str, str | None] = {}
        # session id -> its om.scope.* entries in append order (any branch), so a scope map
        # folds the scope records alone, as SQLite's om_scope_records lets it.
        self.scope_records: dict[str, list[str]] = {}

    # -- writes ------------------------------------------------------------------------

    def check(self, batch: Sequence[SessionEntry]) -> None:
        """Raise the store error the batch breaks, touching nothing."""
        if not batch:
            return
        session_id = batch[0].session_id
        tree = self.trees.get(session_id)
        has_root = tree is not None and tree.root is not None
        pending: dict[str, SessionEntry] = {}
        # Built on the first memory record: a batch of messages (and every message line
        # of a JSONL file being loaded) never pays for it.
        view: _PendingView | None = None
        for entry in batch:
            if entry.id in self.entries:
                raise DuplicateEntryError(
                    f"entry id {entry.id!r} already exists in the store",
                    entry_id=entry.id,
                    session_id=session_id,
                    url=self.url,
                )
            if entry.parent_id is None:
                if has_root:
                    root = tree.root if tree else None
                    raise RootExistsError(
                        f"entry {entry.id!r} has no parent, but session {session_id!r} "
                        f"already has its root {root!r}",
                        entry_id=entry.id,
                        session_id=session_id,
                        url=self.url,
                    )
                has_root = True
            elif entry.parent_id not in pending:
                parent_session = self.session_of(entry.parent_id)
                if parent_session is None:
                    raise UnknownParentError(
                        f"entry {entry.id!r} names parent {entry.parent_id!r}, "
                        "which is not in the store",
                        entry_id=entry.id,
                        session_id=session_id,
                        url=self.url,
                    )
                if parent_session != session_id:
                    raise SessionMismatchError(
                        f"entry {entry.id!r} of session {session_id!r} names parent "
                        f"{entry.parent_id!r} of session {parent_session!r}",
                        entry_id=entry.id,
                        session_id=session_id,
                        url=self.url,
                    )
            try:
                needs = None if entry.kind == "message" else memory_record_needs(entry)
                if needs is not None:
                    if view is None:
                        view = _PendingView(self, pending)
                        for earlier in pending.values():
                            view.add(earlier)
                    validate_memory_record(entry, needs, view.facts(entry.parent_id, needs))
            except MemoryRecordError as exc:
                exc.add_context(url=self.url)
                raise
            pending[entry.id] = entry
            if view is not None:
                view.add(entry)

    def add(self, entry: SessionEntry) -> None:
        """``check([entry])`` then ``apply([entry])``: one line of a file being loaded.

        A message under a known parent of its session (almost every line) needs no more
        than the lookups here; anything else takes the full check.
        """
        parent = self.session_of(entry.parent_id) if entry.parent_id is not None else None
        if (
            parent is None
            or entry.kind != "message"
            or parent != entry.session_id
            or entry.id in self.entries
        ):
            self.check((entry,))
        self.apply((entry,))

    def apply(self, batch: Sequence[SessionEntry]) -> None:
        """Add an already checked batch and move the session's leaf to its last entry."""
        # Locals: a JSONL load applies every line of a file through here, one at a time.
        entries, children, depths, segments = self.entries, self.children, self.depth, self.segment
        heads = self.memory_heads
        for entry in batch:
            entry_id, parent_id = entry.id, entry.parent_id
            tree = self.trees.get(entry.session_id)
            if tree is None:
                tree = self.trees[entry.session_id] = _SessionTree()
            entries[entry_id] = entry
            is_message = entry.kind == "message"
            if not is_message:
                for memory_id, kind in recorded_memory_ids(entry):
                    self.recorders.setdefault(memory_id, []).append((entry_id, kind))
                for memory_id in dropped_memory_ids(entry):
                    self.droppers.setdefault(memory_id, []).append(entry_id)
                for old in superseded_memory_ids(entry):
                    self.superseders.setdefault(old, []).append(entry_id)
                marker = entry.custom_type
                if marker is not None and marker.startswith("om.scope."):
                    self.scope_records.setdefault(entry.session_id, []).append(entry_id)
            tree.order.append(entry_id)
            tree.leaf_count += 1
            if is_message:
                tree.messages += 1
            stamp = comparable_time(entry.timestamp)
            if stamp is not None and (tree.last_activity is None or stamp > tree.last_activity):
                tree.last_activity = stamp
            if parent_id is None:
                tree.root = entry_id
                depth = 0
                segment = self._new_segment(None, 0)
                inherited = None
            else:
                depth = depths[parent_id] + 1
                siblings = children.get(parent_id)
                if siblings:
                    segment = self._new_segment(segments[parent_id], depth)
                    siblings.append(entry_id)
                else:
                    tree.leaf_count -= 1  # the parent was a leaf until now
                    segment = segments[parent_id]
                    children[parent_id] = [entry_id]
                inherited = heads[parent_id]
            depths[entry_id] = depth
            segments[entry_id] = segment
            self.segment_ids[segment].append(entry_id)
            if is_message and is_eligible_observation_source_entry(entry):
                self.segment_messages[segment].append(depth)
            heads[entry_id] = inherited if is_message or not is_memory_record(entry) else entry_id
            tree.leaf = entry_id

    def _new_segment(self, parent: int | None, start: int) -> int:
        self.segment_parent.append(parent)
        self.segment_start.append(start)
        self.segment_ids.append([])
        self.segment_messages.append([])
        return len(self.segment_start) - 1

    def drop_session(self, session_id: str) -> None:
        """Forget a session's entries (a lazily loaded session found damaged)."""
        tree = self.trees.pop(session_id, None)
        self.scope_records.pop(session_id, None)
        if tree is None:
            return
        for entry_id in tree.order:
            entry = pop_entry(self.entries, entry_id)
            self.children.pop(entry_id, None)
            self.depth.pop(entry_id, None)
            # Its segments stay numbered (the lists are append-only) but nothing names them.
            segment = self.segment.pop(entry_id, None)
            if segment is not None:
                self.segment_ids[segment] = []
                self.segment_messages[segment] = []
            self.memory_heads.pop(entry_id, None)
            if entry is None:
                continue  # a message line never parsed: no memory id names it
            for memory_id, kind in recorded_memory_ids(entry):
                found = self.recorders.get(memory_id, [])
                if (entry_id, kind) in found:
                    found.remove((entry_id, kind))
                if not found:
                    self.recorders.pop(memory_id, None)
            for memory_id in dropped_memory_ids(entry):
                dropping = self.droppers.get(memory_id, [])
                if entry_id in dropping:
                    dropping.remove(entry_id)
                if not dropping:
                    self.droppers.pop(memory_id, None)
            for old in superseded_memory_ids(entry):
                by = self.superseders.get(old, [])
                if entry_id in by:
                    by.remove(entry_id)
                if not by:
                    self.superseders.pop(old, None)

    def session_of(self, entry_id: str) -> str | None:
        """The session holding ``entry_id``, or None when the store has no such entry;
        reads no message body."""
        entries = self.entries
        if isinstance(entries, LazyEntries):
            return entries.session_of(entry_id)
        entry = entries.get(entry_id)
        return None if entry is None else entry.session_id

    def entries_of(self, ids: Sequence[str]) -> list[SessionEntry]:
        """The entries of ``ids``; a ``LazyEntries`` reads each file once for them."""
        entries = self.entries
        if isinstance(entries, LazyEntries):
            return entries.many(ids)
        return [entries[i] for i in ids]

    def resolve_leaf(self, session_id: str, entry_id: str) -> str:
        """Check that ``entry_id`` is an entry of the session and return it."""
        owner = self.session_of(entry_id)
        if owner is None:
            raise EntryNotFoundError(
                f"entry {entry_id!r} is not in the store",
                entry_id=entry_id,
                session_id=session_id,
                url=self.url,
            )
        if owner != session_id:
            raise SessionMismatchError(
                f"entry {entry_id!r} belongs to session {owner!r}, not {session_id!r}",
                entry_id=entry_id,
                session_id=session_id,
                url=self.url,
            )
        return entry_id

    # -- reads -------------------------------------------------------------------------

    def session_entries(self, session_id: str) -> list[SessionEntry]:
        tree = self.trees.get(session_id)
        return self.entries_of(tree.order) if tree else []

    def leaf(self, session_id: str) -> str | None:
        tree = self.trees.get(session_id)
        return tree.leaf if tree else None

    def leaves(self, session_id: str) -> list[str]:
        tree = self.trees.get(session_id)
        return [i for i in tree.order if i not in self.children] if tree else []

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
        pieces = []
        for segment, first, last in self.path_pieces(leaf_id):
            start = self.segment_start[segment]
            pieces.append(self.segment_ids[segment][first - start : last + 1 - start])
        return [entry_id for piece in reversed(pieces) for entry_id in piece]

    def branch(self, session_id: str, leaf_id: str | None) -> list[SessionEntry]:
        return self.entries_of(self.path_ids(session_id, leaf_id))

    def memory_head(self, session_id: str, leaf_id: str | None) -> str | None:
        """The newest memory record on the branch to the leaf (default: current), or None."""
        if leaf_id is None:
            leaf_id = self.leaf(session_id)
            if leaf_id is None:
                return None
        else:
            self.resolve_leaf(session_id, leaf_id)
        return self.memory_heads[leaf_id]

    def path_membership(self, session_id: str, leaf_id: str | None) -> PathMembership:
        """Membership test for the path from the root to the leaf (default: current leaf)."""
        if leaf_id is None:
            leaf_id = self.leaf(session_id)
        else:
            self.resolve_leaf(session_id, leaf_id)
        return PathMembership(
            self.segment,
            self.depth,
            self.segment_parent.__getitem__,
            self.segment_start.__getitem__,
            leaf_id,
        )

    def is_on_branch(self, session_id: str, entry_id: str, leaf_id: str | None) -> bool:
        """Whether the entry lies on the path to the leaf (default: the current leaf)."""
        if leaf_id is None:
            leaf_id = self.leaf(session_id)
            if leaf_id is None:
                return False
        else:
            self.resolve_leaf(session_id, leaf_id)
        if self.session_of(entry_id) != session_id:
            return False
        return self.path_membership(session_id, leaf_id).contains(entry_id)

    # -- per-turn reads over the path's pieces -------------------------------------------

    def tip(self, session_id: str, leaf_id: str | None) -> str | None:
        """The leaf a read is about: ``leaf_id`` once checked, else the current leaf."""
        if leaf_id is None:
            return self.leaf(session_id)
        return self.resolve_leaf(session_id, leaf_id)

    def path_pieces(self, tip: str | None) -> Iterator[tuple[int, int, int]]:
        """``(segment, first depth, last depth)`` of the path from the root to ``tip``,
        tip side first: one piece per fork on the path."""
        if tip is None:
            return
        segment: int | None = self.segment[tip]
        last = self.depth[tip]
        while segment is not None:
            first = self.segment_start[segment]
            yield segment, first, last
            last = first - 1
            segment = self.segment_parent[segment]

    def entry_count(self, session_id: str, leaf_id: str | None) -> int:
        """Number of entries on the path to the leaf: its depth plus one."""
        tip = self.tip(session_id, leaf_id)
        return 0 if tip is None else self.depth[tip] + 1

    def recent_messages(
        self, session_id: str, count: int, leaf_id: str | None
    ) -> list[SessionEntry]:
        """The path's last ``count`` eligible messages, oldest first."""
        chosen: list[str] = []
        if count > 0:
            for segment, first, last in self.path_pieces(self.tip(session_id, leaf_id)):
                if self._messages_before(segment, first, last + 1, count, chosen):
                    break
        chosen.reverse()
        return self.entries_of(chosen)

    def page_messages(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"],
        leaf_id: str | None,
    ) -> tuple[list[SessionEntry], bool]:
        """``page_around_cursor`` over the path, reading O(pieces + limit) entries."""
        tip = self.tip(session_id, leaf_id)
        membership = self.path_membership(session_id, tip) if tip is not None else None
        if (
            self.session_of(cursor) != session_id
            or membership is None
            or not membership.contains(cursor)
        ):
            raise EntryNotFoundError(
                f"cursor {cursor!r} is not an entry of the current branch",
                entry_id=cursor,
                session_id=session_id,
                url=self.url,
            )
        target = self.entries[cursor]
        if not is_eligible_observation_source_entry(target):
            raise InvalidInputError(
                f"cursor {cursor!r} is a {target.kind} entry, not a user, assistant "
                "or tool message",
                entry_id=cursor,
                session_id=session_id,
                url=self.url,
            )
        at = self.depth[cursor]
        chosen: list[str] = []
        if direction == "forward":
            # Pieces from the cursor's down to the tip, read root side first.
            pieces = []
            for piece in self.path_pieces(tip):
                pieces.append(piece)
                if piece[1] <= at:
                    break
            for segment, first, last in reversed(pieces):
                depths = self.segment_messages[segment]
                position = bisect_right(depths, max(at, first - 1))
                end = min(bisect_right(depths, last), position + limit + 1 - len(chosen))
                chosen.extend(self._id_at(segment, depths[i]) for i in range(position, end))
                if len(chosen) > limit:
                    break
            return self.entries_of(chosen[:limit]), len(chosen) > limit
        for segment, first, last in self.path_pieces(tip):
            if first >= at:
                continue  # wholly after the cursor
            if self._messages_before(segment, first, min(last + 1, at), limit + 1, chosen):
                break
        more = len(chosen) > limit
        chosen = chosen[:limit]
        chosen.reverse()
        return self.entries_of(chosen), more

    def _messages_before(
        self, segment: int, first: int, stop: int, count: int, chosen: list[str]
    ) -> bool:
        """Add the segment's eligible messages at depths ``[first, stop)`` to ``chosen``,
        newest first, until it holds ``count``; True once it does."""
        depths = self.segment_messages[segment]
        low = bisect_left(depths, first)
        position = bisect_left(depths, stop)
        while position > low and len(chosen) < count:
            position -= 1
            chosen.append(self._id_at(segment, depths[position]))
        return len(chosen) >= count

    def _id_at(self, segment: int, depth: int) -> str:
        return self.segment_ids[segment][depth - self.segment_start[segment]]

    def scope_entries(self, session_id: str, leaf_id: str | None) -> list[SessionEntry]:
        """The path's om.scope.* entries, root first: O(scope records of the session)."""
        tip = self.tip(session_id, leaf_id)
        records = self.scope_records.get(session_id)
        if tip is None or not records:
            return []
        on_path = self.path_membership(session_id, tip).contains
        found = sorted((e for e in records if on_path(e)), key=self.depth.__getitem__)
        return self.entries_of(found)

    def entries_after(
        self, session_id: str, after_id: str | None, leaf_id: str | None
    ) -> list[SessionEntry] | None:
        """Path entries strictly after ``after_id`` (all when None), root side first, read
        from the pieces below it: O(forks + answer). None when ``after_id`` is off the path."""
        tip = self.tip(session_id, leaf_id)
        if tip is None:
            return None if after_id is not None else []
        at = -1
        if after_id is not None:
            if self.session_of(after_id) != session_id:
                return None
            if not self.path_membership(session_id, tip).contains(after_id):
                return None
            at = self.depth[after_id]
        chosen: list[str] = []
        for segment, first, last in self.path_pieces(tip):
            if last <= at:
                break
            start = self.segment_start[segment]
            ids = self.segment_ids[segment]
            chosen[:0] = ids[max(first, at + 1) - start : last + 1 - start]
        return self.entries_of(chosen)

    def memory_records_since(
        self, session_id: str, leaf_id: str | None, known: Mapping[str, object]
    ) -> tuple[str | None, list[SessionEntry]]:
        """The newest memory record of the path that ``known`` holds (None: none) and the
        path's memory records after it, root side first.

        The records are found through ``memory_heads`` (each record's parent names the
        record before it), so no other entry of the path is read: a ledger is the fold of
        these alone, each at its depth.
        """
        tip = self.tip(session_id, leaf_id)
        heads, entries = self.memory_heads, self.entries
        records: list[SessionEntry] = []
        current = None if tip is None else heads[tip]
        while current is not None and current not in known:
            record = entries[current]
            records.append(record)
            parent = record.parent_id
            current = None if parent is None else heads[parent]
        records.reverse()
        return current, records

    def message_tokens(
        self,
        session_id: str,
        leaf_id: str | None,
        counted: dict[str, int],
        count: Callable[[SessionEntry], int],
    ) -> int:
        """The summed ``count`` of the path's message entries, remembered in ``counted``.

        Path ids come from the segment pieces; an entry is read only when ``counted``
        lacks it, so a session whose counts came with its index parses no message line.
        """
        total = 0
        entries = self.entries
        for segment, first, last in self.path_pieces(self.tip(session_id, leaf_id)):
            start = self.segment_start[segment]
            for entry_id in self.segment_ids[segment][first - start : last + 1 - start]:
                tokens = counted.get(entry_id)
                if tokens is None:
                    entry = entries[entry_id]
                    if entry.kind != "message":
                        continue
                    tokens = counted[entry_id] = count(entry)
                total += tokens
        return total

    def source_time(self, session_id: str, tip: str | None) -> Callable[[str], str | None]:
        """``branch_source_times`` of the path to ``tip`` without reading the path."""
        entries = self.entries
        membership: PathMembership | None = None

        def source_time(entry_id: str) -> str | None:
            nonlocal membership
            entry = entries.get(entry_id)
            if entry is None or entry.kind != "message" or entry.session_id != session_id:
                return None
            if membership is None:
                membership = self.path_membership(session_id, tip)
            return entry.timestamp if membership.contains(entry_id) else None

        return source_time

    def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None
    ) -> ObservationalMemoryLedger:
        """The path's ledger restricted to ``memory_ids``, folding only their records.

        Every entry that records, drops or supersedes one of the ids is indexed by id, so the fold
        over those entries alone (in path order, at their depths) equals the whole
        branch's fold restricted to the ids.
        """
        wanted = set(memory_ids)
        tip = self.tip(session_id, leaf_id)
        if tip is None or not wanted:
            return ObservationalMemoryLedger()
        on_path = self.path_membership(session_id, tip).contains
        found: set[str] = set()
        for memory_id in wanted:
            found.update(e for e, _ in self.recorders.get(memory_id, ()) if on_path(e))
            found.update(e for e in self.droppers.get(memory_id, ()) if on_path(e))
            found.update(e for e in self.superseders.get(memory_id, ()) if on_path(e))
        entries, depth = self.entries, self.depth

        def source_time(entry_id: str) -> str | None:
            # branch_source_times: the timestamps of the branch's message entries.
            entry = entries.get(entry_id)
            if entry is None or entry.kind != "message" or entry.session_id != session_id:
                return None
            return entry.timestamp if on_path(entry_id) else None

        builder = LedgerBuilder(source_time=source_time)
        for entry_id in sorted(found, key=depth.__getitem__):
            builder.add(entries[entry_id], depth[entry_id])
        return restrict_ledger(builder.build(), wanted)


class PathMembership:
    """Answers "is this entry on the path from the root to ``tip``?" for many entries.

    The path's pieces (segment -> deepest depth of that segment on the path) are walked
    lazily from the tip towards the root, only as deep as the shallowest entry asked
    about, so a record citing recent messages costs a few steps and one citing ``n``
    entries anywhere costs O(n + forks on the path), never O(n x depth).
    """

    __slots__ = (
        "_depth",
        "_low",
        "_next_hi",
        "_next_segment",
        "_parent",
        "_pieces",
        "_segment",
        "_start",
    )

    def __init__(
        self,
        segment: Mapping[str, int],
        depth: Mapping[str, int],
        segment_parent: Callable[[int], int | None],
        segment_start: Callable[[int], int],
        tip: str | None,
    ) -> None:
        self._segment = segment
        self._depth = depth
        self._parent = segment_parent
        self._start = segment_start
        self._pieces: dict[int, int] = {}
        self._next_segment: int | None = None if tip is None else segment[tip]
        self._next_hi = -1 if tip is None else depth[tip]
        # Every depth >= _low of the path is covered by the pieces walked so far.
        self._low = self._next_hi + 1

    def contains(self, entry_id: str) -> bool:
        segment = self._segment.get(entry_id)
        if segment is None:
            return False
        depth = self._depth[entry_id]
        while depth < self._low and self._next_segment is not None:
            current = self._next_segment
            start = self._start(current)
            self._pieces[current] = self._next_hi
            self._low = start
            self._next_hi = start - 1
            self._next_segment = self._parent(current)
        hi = self._pieces.get(segment)
        return hi is not None and depth <= hi


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


def dropped_memory_ids(entry: SessionEntry) -> list[str]:
    """Observation ids an entry drops: a dropper record's, a folded compaction's."""
    data = entry.data
    if data is None:
        return []
    if entry.kind == "compaction":
        memory = data.get("memory")
        if not isinstance(memory, dict) or memory.get("type") != FOLDED_TYPE:
            return []
        items = memory.get("droppedObservationIds")
    elif entry.custom_type == OBSERVATIONS_DROPPED:
        items = data.get("observationIds")
    else:
        return []
    return [i for i in items if isinstance(i, str)] if isinstance(items, list) else []


def superseded_memory_ids(entry: SessionEntry) -> list[str]:
    """Reflection ids the reflections of an ``om.reflections.recorded`` entry supersede."""
    if entry.custom_type != REFLECTIONS_RECORDED or entry.data is None:
        return []
    items = entry.data.get("reflections")
    if not isinstance(items, list):
        return []
    return [
        old
        for item in items
        if isinstance(item, dict)
        for old in item.get("supersedesReflectionIds") or ()
        if isinstance(old, str)
    ]


class _PendingView:
    """The index plus the checked part of a batch, for branch questions during ``check``.

    Pending entries get their depth and segment here exactly as ``apply`` will give them,
    so branch membership covers the batch's own earlier entries too. They are placed only
    when a memory record asks a branch question: a batch of plain messages (and every line
    of a JSONL file being loaded) pays nothing for it.
    """

    def __init__(self, index: TreeIndex, pending: dict[str, SessionEntry]) -> None:
        self.index = index
        self.pending = pending
        self.depth = ChainMap[str, int]({}, index.depth)
        self.segment = ChainMap[str, int]({}, index.segment)
        self.with_child: set[str] = set()
        self.new_segments: list[tuple[int | None, int]] = []
        self.recorders: dict[str, list[tuple[str, str]]] = {}
        self.superseders: dict[str, list[str]] = {}
        self.unplaced: list[SessionEntry] = []

    def add(self, entry: SessionEntry) -> None:
        """Note a checked entry of the batch (already in ``pending``)."""
        self.unplaced.append(entry)
        for memory_id, kind in recorded_memory_ids(entry):
            self.recorders.setdefault(memory_id, []).append((entry.id, kind))
        for old in superseded_memory_ids(entry):
            self.superseders.setdefault(old, []).append(entry.id)

    def _place_pending(self) -> None:
        for entry in self.unplaced:
            self._place(entry)
        self.unplaced.clear()

    def _place(self, entry: SessionEntry) -> None:
        parent = entry.parent_id
        if parent is None:
            depth, segment = 0, self._new_segment(None, 0)
        else:
            depth = self.depth[parent] + 1
            if parent in self.with_child or self.index.children.get(parent):
                segment = self._new_segment(self.segment[parent], depth)
            else:
                segment = self.segment[parent]
            self.with_child.add(parent)
        self.depth[entry.id] = depth
        self.segment[entry.id] = segment

    def _new_segment(self, parent: int | None, start: int) -> int:
        self.new_segments.append((parent, start))
        return len(self.index.segment_start) + len(self.new_segments) - 1

    def _segment_parent(self, segment: int) -> int | None:
        known = len(self.index.segment_parent)
        return (
            self.index.segment_parent[segment]
            if segment < known
            else (self.new_segments[segment - known][0])
        )

    def _segment_start(self, segment: int) -> int:
        known = len(self.index.segment_start)
        return (
            self.index.segment_start[segment]
            if segment < known
            else (self.new_segments[segment - known][1])
        )

    def entry(self, entry_id: str) -> SessionEntry | None:
        return self.pending.get(entry_id) or self.index.entries.get(entry_id)

    def membership(self, tip: str | None) -> PathMembership:
        return PathMembership(
            self.segment, self.depth, self._segment_parent, self._segment_start, tip
        )

    def facts(self, parent_id: str | None, needs: MemoryRecordNeeds) -> BranchFacts:
        self._place_pending()
        on_branch = self.membership(parent_id).contains
        eligible = {
            s
            for s in needs.source_entry_ids
            if (e := self.entry(s)) is not None
            and is_eligible_observation_source_entry(e)
            and on_branch(s)
        }
        covered = {c for c in needs.covered_entry_ids if on_branch(c)}
        observations: set[str] = set()
        reflections: set[str] = set()
        for memory_id in needs.memory_ids_to_look_up:
            found = [
                *self.index.recorders.get(memory_id, ()),
                *self.recorders.get(memory_id, ()),
            ]
            for recorder, kind in found:
                if on_branch(recorder):
                    (observations if kind == "observation" else reflections).add(memory_id)
        superseded = {
            old
            for old in needs.referenced_reflection_ids
            if any(
                on_branch(by)
                for by in (*self.index.superseders.get(old, ()), *self.superseders.get(old, ()))
            )
        }
        return BranchFacts(
            eligible_source_ids=frozenset(eligible),
            entry_ids_on_branch=frozenset(covered),
            recorded_observation_ids=frozenset(observations),
            recorded_reflection_ids=frozenset(reflections),
            superseded_reflection_ids=frozenset(superseded),
        )


def comparable_time(value: str) -> str | None:
    """The timestamp as fixed-width UTC text, which sorts as the time it names.

    Our own timestamps already have that form, so they skip the parse: loading a large
    session pays a length check per entry, not a datetime round trip.
    """
    if (
        len(value) == 24
        and value[4] == "-"
        and value[10] == "T"
        and value[19] == "."
        and value[-1] == "Z"
    ):
        return value
    if (
        len(value) == 20
        and value[-1] == "Z"
        and value[4] == "-"
        and value[10] == "T"
        and value[13] == ":"
        and value[16] == ":"
    ):
        # Whole seconds in UTC: an entry's timestamp, so already checked to be a time.
        return value[:19] + ".000Z"
    return utc_timestamp(value)
