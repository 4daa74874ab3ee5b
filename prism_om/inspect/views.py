"""What each page shows, read through the public store API and the memory services.

Every text leaves here redacted (then clipped, so a cut never splits a secret), and
revoked messages and memory leave with their id and no text, as in the CLI's read
commands. The invalidation set is read again for every request, so a tombstone written
while the page is served counts at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..core.ledger import ObservationalMemoryLedger
from ..core.projection import active_memory
from ..core.records import OBSERVATIONS_DROPPED, OBSERVATIONS_RECORDED, REFLECTIONS_RECORDED
from ..core.redaction import Redactor, redacted_entry_text
from ..core.relevance import observation_pool_tokens
from ..core.scope_map import WorkScopeMap
from ..core.withheld import withheld_memory_ids
from ..entries import SessionEntry
from ..errors import CorruptStoreError, SessionNotFoundError
from ..reports.entry_text import wire_text
from ..reports.session_list import session_rows
from ..reports.thresholds import compaction_gauge_tokens, memory_thresholds
from ..stores import SessionStore
from ..tokens import get_estimator
from .params import TIMELINE_LIMIT_DEFAULT, InspectParamError, shown

__all__ = [
    "LEAVES_SHOWN",
    "MEMORY_PAGE",
    "SESSIONS_PAGE",
    "TEXT_MAX_CHARS",
    "Inspector",
    "clip",
]

SESSIONS_PAGE: Final = 200
MEMORY_PAGE: Final = 100
LEAVES_SHOWN: Final = 50
DAMAGED_SHOWN: Final = 50
"""Damaged sessions named on the sessions page (the rest are counted)."""
TEXT_MAX_CHARS: Final = 2000
BLOCK_MAX_CHARS: Final = 60_000
# How far up a fork's parents the tree looks for where it leaves the chosen branch.
_FORK_WALK_MAX: Final = 500
_IDS_SHOWN: Final = 20
SCOPES_SHOWN: Final = 200


def clip(text: str, limit: int = TEXT_MAX_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Hits the search box shows (the search's own cap is 100).
SEARCH_PAGE_HITS = 50


@dataclass
class Inspector:
    """The store the page reads, and how it redacts and withholds."""

    store: SessionStore
    redactor: Redactor
    tombstone_scopes: list[str] | None = None
    recent_messages: int = 8

    async def invalidated(self) -> frozenset[str]:
        from ..observational_memory.revocation import list_store_invalidated_ids

        return await list_store_invalidated_ids(self.store, self.tombstone_scopes)

    def text(self, value: str, limit: int = TEXT_MAX_CHARS) -> str:
        return clip(self.redactor.text(value), limit)

    # -- sessions -----------------------------------------------------------------------

    async def sessions(self, needle: str | None, offset: int) -> dict[str, Any]:

        rows = await session_rows(self.store)
        if needle:
            folded = needle.casefold()
            rows = [r for r in rows if folded in r["session"].casefold()]
        page = rows[offset : offset + SESSIONS_PAGE]
        invalid = await self.invalidated()
        estimator = get_estimator()
        for row in page:
            try:
                live = await self.store.live_ledger(row["session"])
            except CorruptStoreError as exc:
                # One damaged session must not hide the others (as in 'prism-om sessions');
                # a busy or closed store is the whole page's error.
                row["poolTokens"], row["problem"] = None, self.text(str(exc))
                continue
            observations, _ = active_memory(live, invalid)
            row["poolTokens"] = observation_pool_tokens(
                [r.observation for r in observations], estimator
            )
        damaged = await self.store.damaged_sessions()
        unreadable = {
            **{sid: self.text(str(e)) for sid, e in damaged.items()},
            **{r["session"]: r["problem"] for r in page if "problem" in r},
        }
        after = offset + SESSIONS_PAGE
        return {
            "rows": page,
            "total": len(rows),
            "offset": offset,
            "next": after if after < len(rows) else None,
            "previous": max(0, offset - SESSIONS_PAGE) if offset else None,
            "filter": needle or "",
            "damaged": dict(list(unreadable.items())[:DAMAGED_SHOWN]),
            "damagedTotal": len(unreadable),
        }

    # -- one session ---------------------------------------------------------------------

    async def session(self, session_id: str) -> str:
        """The session's current leaf; ``SessionNotFoundError`` for an unknown session."""
        current = await self.store.leaf(session_id)
        if current is None:
            raise SessionNotFoundError(
                f"no session {session_id!r} in this store", session_id=session_id
            )
        return current

    async def chosen_leaf(self, session_id: str, leaf: str | None) -> tuple[str, str, list[str]]:
        """The current leaf, the leaf asked for (default: the current one), every leaf."""
        current = await self.session(session_id)
        leaves = await self.store.leaves(session_id)
        if leaf is None:
            return current, current, leaves
        if leaf != current and leaf not in leaves:
            raise InspectParamError(
                f"leaf {shown(leaf)} is not a leaf of session {session_id!r} "
                f"(it has {len(leaves)} leaves; the page's branch list names them)"
            )
        return current, leaf, leaves

    async def branches(
        self, session_id: str, current: str, chosen: str, leaves: list[str]
    ) -> list[dict[str, Any]]:
        """Each leaf with its length and where it forks off the current branch."""
        store = self.store
        heads = [current, *[leaf for leaf in leaves if leaf != current]][:LEAVES_SHOWN]
        found = await store.get_many(heads)
        rows = []
        for leaf in heads:
            fork = None if leaf == current else await self._fork_point(session_id, leaf, current)
            entry = found.get(leaf)
            rows.append(
                {
                    "leaf": leaf,
                    "current": leaf == current,
                    "chosen": leaf == chosen,
                    "entries": await store.entry_count(session_id, leaf),
                    "fork": fork,
                    "label": _label(entry) if entry else "",
                    "text": self.text(redacted_entry_text(entry, self.redactor), 120)
                    if entry
                    else "",
                }
            )
        return rows

    async def _fork_point(self, session_id: str, leaf: str, current: str) -> dict[str, Any] | None:
        """Where the branch of ``leaf`` leaves the current one (None: further than we walk)."""
        store = self.store
        entry = await store.get(leaf)
        for _ in range(_FORK_WALK_MAX):
            if entry is None or entry.parent_id is None:
                return None
            if await store.is_on_branch(session_id, entry.parent_id, current):
                depth = await store.entry_count(session_id, entry.parent_id)
                return {"entry": entry.parent_id, "position": depth - 1}
            entry = await store.get(entry.parent_id)
        return None

    async def timeline(
        self,
        session_id: str,
        leaf: str,
        cursor: str | None,
        direction: str,
        limit: int = TIMELINE_LIMIT_DEFAULT,
    ) -> dict[str, Any]:
        """One page of the branch, by cursor: never the whole branch in one answer."""
        store = self.store
        if cursor is None:
            entries = await self._walk_up(leaf, limit)
        else:
            if not await store.is_on_branch(session_id, cursor, leaf):
                raise InspectParamError(
                    f"cursor {shown(cursor)} is not an entry on the branch of leaf {leaf!r}"
                )
            if direction == "forward":
                after = await store.entries_after(session_id, cursor, leaf)
                entries = after[:limit]
            else:
                start = await store.get(cursor)
                parent = start.parent_id if start is not None else None
                entries = await self._walk_up(parent, limit) if parent else []
        invalid = await self.invalidated()
        first_position = (await store.entry_count(session_id, entries[0].id)) - 1 if entries else 0
        items = [
            self._item(entry, first_position + index, invalid)
            for index, entry in enumerate(entries)
        ]
        return {
            "items": items,
            "older": entries[0].id if entries and entries[0].parent_id else None,
            "newer": entries[-1].id if entries and entries[-1].id != leaf else None,
            "length": await store.entry_count(session_id, leaf),
            "limit": limit,
        }

    async def _walk_up(self, start: str | None, count: int) -> list[SessionEntry]:
        """``count`` entries ending at ``start``, root side first (a parent read each)."""
        chain: list[SessionEntry] = []
        next_id = start
        while next_id is not None and len(chain) < count:
            entry = await self.store.get(next_id)
            if entry is None:
                break
            chain.append(entry)
            next_id = entry.parent_id
        chain.reverse()
        return chain

    def _item(self, entry: SessionEntry, position: int, invalid: frozenset[str]) -> dict[str, Any]:
        revoked = entry.id in invalid
        item: dict[str, Any] = {
            "id": entry.id,
            "position": position,
            "kind": entry.kind,
            "label": _label(entry),
            "time": entry.timestamp[:19].replace("T", " "),
            "revoked": revoked,
            "text": "" if revoked else self.text(redacted_entry_text(entry, self.redactor)),
            "ids": [],
            "css": _css(entry),
        }
        data = entry.data or {}
        marker = entry.custom_type or ""
        if marker == OBSERVATIONS_RECORDED:
            ids = [o.get("id") for o in data.get("observations") or () if isinstance(o, dict)]
            item["text"] = f"observer pass: {len(ids)} observation(s) recorded"
            item["ids"] = [str(i) for i in ids[:_IDS_SHOWN]]
        elif marker == REFLECTIONS_RECORDED:
            ids = [r.get("id") for r in data.get("reflections") or () if isinstance(r, dict)]
            item["text"] = f"reflector pass: {len(ids)} reflection(s) recorded"
            item["ids"] = [str(i) for i in ids[:_IDS_SHOWN]]
        elif marker == OBSERVATIONS_DROPPED:
            ids = list(data.get("observationIds") or ())
            item["text"] = f"{len(ids)} observation(s) dropped"
            item["ids"] = [str(i) for i in ids[:_IDS_SHOWN]]
        elif entry.kind == "compaction" and not revoked:
            item["text"] = self.text(entry.summary or "")
        return item

    # -- memory --------------------------------------------------------------------------

    async def memory(self, session_id: str, leaf: str, offset: int) -> dict[str, Any]:
        from ..observational_memory import build_observational_memory_context_blocks

        store = self.store
        invalid = await self.invalidated()
        ledger = await store.ledger(session_id, leaf)
        blocks = await build_observational_memory_context_blocks(
            store,
            session_id=session_id,
            leaf_id=leaf,
            keep_recent_entries=self.recent_messages,
            invalidated_ids=invalid,
            secrets=self.redactor,
        )
        figures = await memory_thresholds(store, session_id, invalid, leaf_id=leaf)
        from ..observational_memory.worker_usage import store_worker_usage

        # What memory costs (the workers' tokens) and saves (next request against branch).
        usage = await store_worker_usage(store, session_id, leaf)
        carried = sum(b.tokens for b in blocks)
        branch_tokens = int(figures["transcript"]["branchTokens"])
        visible = {i for b in blocks for i in b.memory_ids}
        observations = self._observations(ledger, invalid, visible)
        return {
            "blocks": [
                {"name": b.name, "tokens": b.tokens, "text": self.text(b.text, BLOCK_MAX_CHARS)}
                for b in blocks
            ],
            "gauges": _gauges(figures, blocks),
            "usage": usage,
            "request": {
                "nextRequestTokens": carried,
                "branchTokens": branch_tokens,
                "percent": round(100 * carried / branch_tokens) if branch_tokens else None,
            },
            "observations": observations[offset : offset + MEMORY_PAGE],
            "observationsTotal": len(observations),
            "offset": offset,
            "next": offset + MEMORY_PAGE if offset + MEMORY_PAGE < len(observations) else None,
            "previous": max(0, offset - MEMORY_PAGE) if offset else None,
            "reflections": self._reflections(ledger, invalid, visible)[:MEMORY_PAGE],
            "reflectionsTotal": len(ledger.reflections),
            "scopes": _outline(await store.scope_map(session_id, leaf)),
        }

    def _observations(
        self, ledger: ObservationalMemoryLedger, invalid: frozenset[str], visible: set[str]
    ) -> list[dict[str, Any]]:
        revoked = set(withheld_memory_ids(ledger, invalid)[0])
        dropped = set(ledger.dropped_observation_ids)
        rows = []
        for record in reversed(ledger.observations):  # newest first
            o = record.observation
            state = "invalidated" if o.id in revoked else "dropped" if o.id in dropped else "active"
            rows.append(
                {
                    "id": o.id,
                    "state": state,
                    "visible": o.id in visible,
                    "priority": o.priority,
                    "observed": (o.observed_at or "")[:10],
                    "refers": (o.referenced_date or "")[:10],
                    "text": "" if state == "invalidated" else self.text(o.text, 600),
                    "sources": len(o.source_entry_ids),
                }
            )
        return rows

    def _reflections(
        self, ledger: ObservationalMemoryLedger, invalid: frozenset[str], visible: set[str]
    ) -> list[dict[str, Any]]:
        revoked = set(withheld_memory_ids(ledger, invalid)[1])
        superseded = {s.reflection_id: s.superseded_by for s in ledger.supersessions}
        rows = []
        for record in reversed(ledger.reflections):
            r = record.reflection
            if r.id in revoked:
                state = "invalidated"
            elif r.id in superseded:
                state = "superseded"
            else:
                state = "active"
            rows.append(
                {
                    "id": r.id,
                    "state": state,
                    "supersededBy": superseded.get(r.id),
                    "visible": r.id in visible,
                    "priority": r.priority,
                    "recorded": record.recorded_at[:10],
                    "text": "" if state == "invalidated" else self.text(r.text, 600),
                    "observations": len(r.observation_ids),
                }
            )
        return rows

    async def recall(
        self, session_id: str, leaf: str, memory_id: str, offset: int
    ) -> dict[str, Any]:
        """The recall tool's exact-id answer, shaped for the page."""
        from ..observational_memory import recall_observational_memory

        found = await recall_observational_memory(
            self.store,
            memory_id,
            session_id=session_id,
            leaf_id=leaf,
            invalidated_ids=await self.invalidated(),
            sources_offset=offset,
            secrets=self.redactor,
        )
        sources = []
        for wire in found.sources:
            message = wire.get("message") or {}
            sources.append(
                {
                    "id": str(wire.get("id", "")),
                    "time": str(wire.get("timestamp", ""))[:19].replace("T", " "),
                    "role": str(message.get("role") or wire.get("kind", "")),
                    "text": clip(wire_text(wire), 8000),  # already redacted by the recall,
                }
            )
        return {
            "id": found.id,
            "kind": found.kind,
            "found": found.found,
            "reason": found.reason,
            "text": clip(found.text or "", 8000),
            "dropped": found.dropped,
            "supersededBy": found.superseded_by,
            "supporting": [
                {"id": str(o.get("id", "")), "text": clip(str(o.get("text", "")), 600)}
                for o in found.supporting_observations
            ],
            "sources": sources,
            "missing": list(found.missing_source_entry_ids),
            "total": found.sources_total,
            "offset": found.sources_offset,
            "next": found.next_sources_offset,
        }

    async def search(
        self, session_id: str, leaf: str, query: str, kinds: list[str] | None
    ) -> list[dict[str, Any]]:
        """The ranked search's hits on the branch, withheld and redacted like recall."""
        from ..observational_memory.search import search_observational_memory

        results = await search_observational_memory(
            self.store,
            session_id,
            query,
            limit=SEARCH_PAGE_HITS,
            kinds=kinds,  # type: ignore[arg-type]  # checked by the search itself
            leaf_id=leaf,
            invalidated_ids=await self.invalidated(),
            secrets=self.redactor,
        )
        return [
            {
                "kind": h.kind,
                "id": self.redactor.text(h.id),
                "score": f"{h.score:.3f}",
                "status": h.status,
                "time": h.timestamp[:19].replace("T", " "),
                "text": clip(h.text, 600),
                "sources": [self.redactor.text(s) for s in h.source_entry_ids[:20]],
                "more": max(0, len(h.source_entry_ids) - 20),
            }
            for h in results.hits
        ]


def _label(entry: SessionEntry) -> str:
    return entry.role or entry.custom_type or entry.kind


def _css(entry: SessionEntry) -> str:
    if entry.kind == "message":
        return f"msg role-{entry.role}"
    if entry.kind == "compaction":
        return "compaction"
    marker = entry.custom_type or ""
    if marker == OBSERVATIONS_DROPPED:
        return "record drop"
    return "record" if marker.startswith("om.") else "custom"


def _gauges(figures: dict[str, Any], blocks: list[Any]) -> list[dict[str, Any]]:
    seen, limits = figures["transcript"], figures["thresholds"]
    compaction = seen.get("compaction")
    # After a compaction the request replays only the history since it (thresholds.py).
    transcript = (
        ("transcript on this branch", seen["branchTokens"], "context.compactAfterTokens")
        if compaction is None
        else (
            f"history since the compaction ({compaction['entriesAfter']} entries)",
            compaction_gauge_tokens(figures),
            "context.compactAfterTokens",
        )
    )
    rows = [
        ("unobserved messages", seen["unobservedMessageTokens"], "observation.messageTokens"),
        (
            "unreflected observations",
            seen["unreflectedObservationTokens"],
            "reflection.observationTokens",
        ),
        transcript,
    ]
    gauges = []
    for label, value, key in rows:
        limit = int(limits[key])
        ratio = min(1.0, value / limit) if limit else 1.0
        gauges.append(
            {
                "label": label,
                "value": int(value),
                "limit": limit,
                "key": key,
                "width": round(ratio * 300, 1),
                "over": value >= limit,
                "compacted": key == "context.compactAfterTokens"
                and compaction is not None
                and value < limit,
            }
        )
    return gauges


def _outline(scope_map: WorkScopeMap) -> list[dict[str, Any]]:
    """The scope tree, depth first, each with its grants; empty with only the root."""
    if not scope_map.has_host_scopes:
        return []
    rows: list[dict[str, Any]] = []

    def visit(scope_id: str) -> None:
        scope = scope_map.scopes[scope_id]
        rows.append(
            {
                "id": scope.id,
                "depth": scope.depth,
                "kind": scope.kind or "",
                "label": scope.label or "",
                "closed": scope.closed,
                "current": scope.id == scope_map.current,
                "binds": len(scope.binds),
                "principals": list(scope.principals[:_IDS_SHOWN]),
                "revoked": list(scope.revoked_principals[:_IDS_SHOWN]),
            }
        )
        for child in scope_map.children(scope_id):
            if len(rows) < SCOPES_SHOWN:
                visit(child)

    visit(scope_map.root.id)
    return rows
