"""Exact-id recall: the source evidence behind one observation or reflection id.

Recall reads the *complete* ledger of one branch (dropped observations included, no
work-scope filter): an id the agent once saw stays recallable after the pool moved on.
It never searches: a malformed id raises ``InvalidIdError`` before anything is read, an
id that no entry of the branch recorded answers ``found: false, reason: "unknown"``.

Withholding (``invalidated_ids``, e.g. from ``list_invalidated_ids``): an observation is
withheld when its own id or any of its sources is invalidated, a reflection when its own
id is or when any supporting observation is (judged on the full ledger, like
:func:`.projection.active_memory`). A withheld id answers ``found: false, reason:
"revoked"`` and carries no derived text and no sources, so nothing revoked reaches the
agent through recall.

Result shapes (``MemoryRecall.to_json()``)::

    {"id": "...", "kind": null, "found": false, "reason": "unknown"}
    {"id": "...", "kind": "observation", "found": false, "reason": "revoked"}
    {"id": "...", "kind": "observation", "found": true, "text": "...",
     "observation": {...wire fields...}, "dropped": false,
     "recordedEntryId": "...", "recordedAt": "...",
     "sources": [{...entry wire...}], "missingSourceEntryIds": []}
    {"id": "...", "kind": "reflection", "found": true, "text": "...",
     "reflection": {...}, "recordedEntryId": "...", "recordedAt": "...",
     "supersededBy": null or "...",
     "supportingObservations": [{...observation wire..., "dropped": bool}],
     "droppedSupportingObservationIds": [], "missingSupportingObservationIds": [],
     "sources": [...], "missingSourceEntryIds": []}

A reflection superseded by a later one (``supersedesReflectionIds``) is still found, with
the superseding reflection's id in ``supersededBy`` (``null`` while it is active, and when
its successor is withheld, which makes it active again); a consolidating reflection lists
the ids it supersedes in its wire fields, each recallable in turn, and is withheld when
any reflection it supersedes is.

Every string (text, fields, source entries) is redacted of ``secrets``. Sources come in
the order the memory cites them, each once.

Sources are paged, so one recall stays bounded however many entries a memory cites: a
call returns the cited ids ``[sources_offset, sources_offset + sources_limit)`` (default
limit ``RECALL_SOURCES_DEFAULT_LIMIT`` = 100, at most ``RECALL_SOURCES_HARD_CAP``) as
``sources`` (found) and ``missingSourceEntryIds`` (not found), with
``"sourcesTotal"`` (distinct cited ids), ``"sourcesOffset"`` and ``"nextSourcesOffset"``
(the offset of the next slice, ``null`` once the last one is returned). Only the slice's
entries are read from a store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.ledger import (
    ObservationalMemoryLedger,
    RecordedObservation,
    RecordedReflection,
    fold_ledger,
)
from ..core.limits import RECALL_SOURCES_DEFAULT_LIMIT, RECALL_SOURCES_HARD_CAP
from ..core.projection import invalidated_observation_ids, withheld_reflection_ids
from ..core.redaction import Redactor, redactor
from ..core.shown import shown
from ..entries import SessionEntry
from ..errors import InvalidIdError, InvalidInputError, PageTooLargeError
from ..ids import is_memory_id
from ..stores._wire import entry_wire, observation_wire
from ..stores.base import SessionStore

__all__ = [
    "MemoryKind",
    "MemoryRecall",
    "RecallReason",
    "check_memory_id",
    "check_sources_window",
    "recall_observational_memory_from_entries",
    "recall_observational_memory_from_store",
]

MemoryKind = Literal["observation", "reflection"]
RecallReason = Literal["unknown", "revoked"]


def check_memory_id(memory_id: object) -> str:
    """``memory_id`` when it is a 12-hex memory id, else ``InvalidIdError``."""
    if not is_memory_id(memory_id):
        if not isinstance(memory_id, str):
            shown = f"({type(memory_id).__name__})"
        elif len(memory_id) <= 64:
            shown = repr(memory_id)
        else:  # a start and a length, not a megabyte of error message
            shown = f"{memory_id[:40]!r}... ({len(memory_id):,} characters)"
        raise InvalidIdError(
            f"invalid memory id {shown}: expected 12 lowercase hex characters",
            memory_id=memory_id if isinstance(memory_id, str) else None,
        )
    assert isinstance(memory_id, str)
    return memory_id


def check_sources_window(
    offset: object, limit: object, *, offset_name: str = "sources_offset"
) -> tuple[int, int]:
    """``(offset, limit)`` of a recall's source slice (``None`` limit: the default)."""
    if limit is None:
        limit = RECALL_SOURCES_DEFAULT_LIMIT
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInputError(
            f"{offset_name} must be an integer >= 0, got {shown(offset)}", field=offset_name
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise InvalidInputError(
            f"sources_limit must be a positive integer, got {shown(limit)}",
            field="sources_limit",
        )
    if limit > RECALL_SOURCES_HARD_CAP:
        raise PageTooLargeError(
            f"sources_limit = {shown(limit)} exceeds its hard cap of {RECALL_SOURCES_HARD_CAP}",
            field="sources_limit",
        )
    return offset, limit


@dataclass(frozen=True)
class MemoryRecall:
    """The answer to one exact-id recall; ``to_json()`` gives the tool's result."""

    id: str
    kind: MemoryKind | None
    found: bool
    reason: RecallReason | None = None
    text: str | None = None
    item: Mapping[str, Any] | None = None
    """The observation's or reflection's wire fields (redacted)."""
    dropped: bool = False
    """An observation retired from the active pool (still recallable by id)."""
    recorded_entry_id: str | None = None
    recorded_at: str | None = None
    sources: tuple[Mapping[str, Any], ...] = ()
    """Source entries as wire dicts (redacted), in citation order: this call's slice."""
    missing_source_entry_ids: tuple[str, ...] = ()
    sources_total: int = 0
    """Distinct source ids the memory cites (found or missing), over every slice."""
    sources_offset: int = 0
    next_sources_offset: int | None = None
    """Where the next slice of sources starts; None when this slice is the last."""
    supporting_observations: tuple[Mapping[str, Any], ...] = ()
    dropped_supporting_observation_ids: tuple[str, ...] = ()
    missing_supporting_observation_ids: tuple[str, ...] = ()
    superseded_by: str | None = None
    """The reflection that supersedes this one (None while it is active)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Room for later features (shared-scope provenance); merged into ``to_json()``."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (see the module docstring for the shapes)."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "found": self.found}
        if not self.found:
            out["reason"] = self.reason
            return out
        out["text"] = self.text
        out[self.kind or "item"] = dict(self.item or {})
        if self.kind == "observation":
            out["dropped"] = self.dropped
        out["recordedEntryId"] = self.recorded_entry_id
        out["recordedAt"] = self.recorded_at
        if self.kind == "reflection":
            out["supersededBy"] = self.superseded_by
            out["supportingObservations"] = [dict(o) for o in self.supporting_observations]
            out["droppedSupportingObservationIds"] = list(self.dropped_supporting_observation_ids)
            out["missingSupportingObservationIds"] = list(self.missing_supporting_observation_ids)
        out["sources"] = [dict(s) for s in self.sources]
        out["missingSourceEntryIds"] = list(self.missing_source_entry_ids)
        out["sourcesTotal"] = self.sources_total
        out["sourcesOffset"] = self.sources_offset
        out["nextSourcesOffset"] = self.next_sources_offset
        out.update(self.extra)
        return out


def recall_observational_memory_from_entries(
    entries: Sequence[SessionEntry],
    memory_id: str,
    *,
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    extra_ledgers: Sequence[ObservationalMemoryLedger] | None = None,
    sources_offset: int = 0,
    sources_limit: int | None = None,
) -> MemoryRecall:
    """Recall one memory id with its exact source entries, from the branch (root first).

    Pure, O(n). ``recall_observational_memory_from_store`` answers the same from a store.

    ``extra_ledgers`` (folded ledgers of granted shared scopes) let ids recorded outside
    this branch resolve; the branch's own ledger wins on an id both hold. Their sources
    resolve on the store path (by id); on the list path only from ``entries``, and are
    otherwise listed in ``missingSourceEntryIds``.

    ``sources_offset`` / ``sources_limit`` choose the slice of cited sources returned
    (default: the first ``RECALL_SOURCES_DEFAULT_LIMIT``); see the module docstring.
    """
    # Checked before anything is read: a malformed id never costs a lookup.
    memory_id = check_memory_id(memory_id)
    window = check_sources_window(sources_offset, sources_limit)
    invalid = frozenset(invalidated_ids or ())
    red = redactor(secrets)
    extras = tuple(extra_ledgers or ())
    by_id = {e.id: e for e in entries}
    ledger = fold_ledger(entries)
    return _recall(ledger, extras, memory_id, invalid, red, by_id.get, window)


def recall_observational_memory_from_store(
    store: SessionStore,
    session_id: str,
    memory_id: str,
    *,
    leaf_id: str | None = None,
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    extra_ledgers: Sequence[ObservationalMemoryLedger] | None = None,
    sources_offset: int = 0,
    sources_limit: int | None = None,
) -> Awaitable[MemoryRecall]:
    """Recall from a store: the branch's ledger rows of this id, then each source by id.

    When nothing is withheld, no extra ledger is given and the branch is the session's
    own, the store reads the id's rows with the sources they cite
    (``SessionStore.memory_with_sources``: one statement on the SQL stores). The
    arguments are checked now, before anything is read; the reads run when awaited.
    """
    try:
        memory_id = check_memory_id(memory_id)
    except InvalidIdError as exc:
        exc.add_context(session_id=session_id, url=store.url)
        raise
    window = check_sources_window(sources_offset, sources_limit)
    invalid = frozenset(invalidated_ids or ())
    red = redactor(secrets)
    extras = tuple(extra_ledgers or ())
    if not invalid and not extras and leaf_id is None:
        return _recall_read_ahead(store, session_id, memory_id, red, window)
    return _recall_store(store, session_id, leaf_id, memory_id, invalid, red, extras, window)


async def _recall_store(
    store: SessionStore,
    session_id: str,
    leaf_id: str | None,
    memory_id: str,
    invalid: frozenset[str],
    red: Redactor,
    extras: tuple[ObservationalMemoryLedger, ...],
    window: tuple[int, int],
) -> MemoryRecall:
    async def subset() -> ObservationalMemoryLedger:
        # Only the rows of this id (and, for a reflection, its supports) are read.
        ledger = await store.memory_subset(session_id, [memory_id], leaf_id)
        if memory_id in ledger.reflections_by_id:
            if invalid:
                # Withholding follows supersession chains of any length, and a superseded
                # reflection is active again when its successor is withheld: the full ledger.
                ledger = await store.ledger(session_id, leaf_id)
            else:
                supports = ledger.reflections_by_id[memory_id].reflection.observation_ids
                ledger = await store.memory_subset(session_id, [memory_id, *supports], leaf_id)
        return ledger

    # Resolved once: withholding and the cited slice are decided before the store fetches
    # that slice by id (append-time validation put every local source on this branch);
    # the result is built once, from what was fetched.
    plan = _resolve(await subset(), extras, memory_id, invalid)
    if isinstance(plan, MemoryRecall):
        return plan
    wanted = _slice(plan.cited, window)
    fetched = await store.get_many(wanted) if wanted else {}
    return _build(plan, red, fetched.get, window)


async def _recall_read_ahead(
    store: SessionStore,
    session_id: str,
    memory_id: str,
    red: Redactor,
    window: tuple[int, int],
) -> MemoryRecall:
    """The answer from ``memory_with_sources`` (nothing withheld, no extra ledgers, the
    session's leaf).

    A reflection's supports, and the window's sources when one of them was not read
    ahead (beyond the store's read-ahead, or missing), are read by id, as
    ``_recall_store`` reads them.
    """
    ledger, read_ahead = await store.memory_with_sources(session_id, memory_id)
    plan = _only_observation(ledger, memory_id) or _resolve(ledger, (), memory_id, frozenset())
    if isinstance(plan, MemoryRecall):
        return plan
    if isinstance(plan.recorded, RecordedReflection):
        wanted_ids = [memory_id, *plan.recorded.reflection.observation_ids]
        ledger = await store.memory_subset(session_id, wanted_ids)
        plan = _resolve(ledger, (), memory_id, frozenset())
        if isinstance(plan, MemoryRecall):  # another writer cannot remove rows; kept safe
            return plan
    wanted = _slice(plan.cited, window)
    if any(i not in read_ahead for i in wanted):
        # The slice as ``_recall_store`` reads it: by id, all of it.
        read_ahead = await store.get_many(wanted)
    return _build(plan, red, read_ahead.get, window)


def _recall(
    ledger: ObservationalMemoryLedger,
    extras: tuple[ObservationalMemoryLedger, ...],
    memory_id: str,
    invalid: frozenset[str],
    red: Redactor,
    lookup: Callable[[str], SessionEntry | None],
    window: tuple[int, int],
) -> MemoryRecall:
    plan = _resolve(ledger, extras, memory_id, invalid)
    return plan if isinstance(plan, MemoryRecall) else _build(plan, red, lookup, window)


@dataclass(frozen=True, slots=True)
class _Found:
    """A memory that recall answers with its text: what ``_build`` needs besides sources."""

    recorded: RecordedObservation | RecordedReflection
    cited: list[str]
    """Every source id the memory cites, in citation order (duplicates kept)."""
    dropped: bool = False
    supports: tuple[tuple[RecordedObservation, bool], ...] = ()
    missing_supports: tuple[str, ...] = ()
    superseded_by: str | None = None


def _resolve(
    ledger: ObservationalMemoryLedger,
    extras: tuple[ObservationalMemoryLedger, ...],
    memory_id: str,
    invalid: frozenset[str],
) -> MemoryRecall | _Found:
    """The memory found and not withheld, or the not-found / revoked answer."""
    ledgers = (ledger, *extras)
    observation = _first(memory_id, (lg.observations_by_id for lg in ledgers))
    if observation is not None:
        owner = next(lg for lg in ledgers if memory_id in lg.observations_by_id)
        return _resolve_observation(observation, owner, invalid)
    reflection = _first(memory_id, (lg.reflections_by_id for lg in ledgers))
    if reflection is not None:
        return _resolve_reflection(reflection, ledgers, invalid)
    return MemoryRecall(id=memory_id, kind=None, found=False, reason="unknown")


def _only_observation(ledger: ObservationalMemoryLedger, memory_id: str) -> _Found | None:
    """``_resolve``'s answer, nothing withheld, for the usual subset: this one observation
    (a memory id read by id, no reflection of it); None for any other ledger."""
    observations = ledger.observations
    if len(observations) != 1 or ledger.reflections:
        return None
    recorded = observations[0]
    obs = recorded.observation
    if obs.id != memory_id:
        return None
    return _Found(
        recorded,
        cited=list(obs.source_entry_ids),
        dropped=memory_id in ledger.dropped_observation_ids,
    )


def _first(key: str, maps: Iterable[Mapping[str, Any]]) -> Any:
    for mapping in maps:
        if key in mapping:
            return mapping[key]
    return None


def _resolve_observation(
    recorded: RecordedObservation,
    owner: ObservationalMemoryLedger,
    invalid: frozenset[str],
) -> MemoryRecall | _Found:
    obs = recorded.observation
    if invalidated_observation_ids([obs], invalid):
        return MemoryRecall(id=obs.id, kind="observation", found=False, reason="revoked")
    return _Found(
        recorded,
        cited=list(obs.source_entry_ids),
        dropped=obs.id in owner.dropped_observation_ids,
    )


def _resolve_reflection(
    recorded: RecordedReflection,
    ledgers: tuple[ObservationalMemoryLedger, ...],
    invalid: frozenset[str],
) -> MemoryRecall | _Found:
    refl = recorded.reflection
    supports: list[tuple[RecordedObservation, bool]] = []
    missing: list[str] = []
    # A set per ledger: a reflection may rest on thousands of observations.
    dropped = {id(lg): frozenset(lg.dropped_observation_ids) for lg in ledgers}
    for obs_id in refl.observation_ids:
        owner = next((lg for lg in ledgers if obs_id in lg.observations_by_id), None)
        if owner is None:
            missing.append(obs_id)
        else:
            supports.append((owner.observations_by_id[obs_id], obs_id in dropped[id(owner)]))
    withheld = invalidated_observation_ids([r for r, _ in supports], invalid)
    owner = next(lg for lg in ledgers if refl.id in lg.reflections_by_id)
    gone = _withheld_reflections(owner, invalid)
    if refl.id in invalid or withheld or refl.id in gone:
        return MemoryRecall(id=refl.id, kind="reflection", found=False, reason="revoked")
    successor = owner.superseded_by.get(refl.id)
    # Dropped supports still contribute their raw sources: dropping prunes the pool, it
    # does not retract the evidence.
    return _Found(
        recorded,
        cited=[s for r, _ in supports for s in r.observation.source_entry_ids],
        supports=tuple(supports),
        missing_supports=tuple(missing),
        superseded_by=successor if successor not in gone else None,
    )


def _build(
    plan: _Found,
    red: Redactor,
    lookup: Callable[[str], SessionEntry | None],
    window: tuple[int, int],
) -> MemoryRecall:
    recorded = plan.recorded
    page = _sources(plan.cited, red, lookup, window)
    if isinstance(recorded, RecordedObservation):
        obs = recorded.observation
        return MemoryRecall(
            id=obs.id,
            kind="observation",
            found=True,
            text=red.text(obs.text),
            item=red.value(observation_wire(obs)),
            dropped=plan.dropped,
            recorded_entry_id=recorded.recorded_entry_id,
            recorded_at=recorded.recorded_at,
            **page,
        )
    refl = recorded.reflection
    supports = plan.supports
    return MemoryRecall(
        id=refl.id,
        kind="reflection",
        found=True,
        text=red.text(refl.text),
        item=red.value(refl.model_dump(by_alias=True, mode="json")),
        recorded_entry_id=recorded.recorded_entry_id,
        recorded_at=recorded.recorded_at,
        **page,
        supporting_observations=tuple(
            {**red.value(observation_wire(r.observation)), "dropped": d} for r, d in supports
        ),
        dropped_supporting_observation_ids=tuple(r.id for r, d in supports if d),
        missing_supporting_observation_ids=plan.missing_supports,
        superseded_by=plan.superseded_by,
    )


def _withheld_reflections(
    ledger: ObservationalMemoryLedger, invalid: frozenset[str]
) -> frozenset[str]:
    if not invalid:
        return frozenset()
    withheld = invalidated_observation_ids(ledger.observations, invalid) | invalid
    return withheld_reflection_ids(ledger, withheld)


def _sources(
    source_ids: Collection[str],
    red: Redactor,
    lookup: Callable[[str], SessionEntry | None],
    window: tuple[int, int],
) -> dict[str, Any]:
    """The ``MemoryRecall`` fields of one slice of the cited sources (looked up: the slice)."""
    offset, limit = window
    distinct = list(dict.fromkeys(source_ids))
    found: list[Mapping[str, Any]] = []
    missing: list[str] = []
    for source_id in distinct[offset : offset + limit]:
        entry = lookup(source_id)
        if entry is None:
            missing.append(source_id)
        else:
            found.append(red.value(entry_wire(entry)))
    end = offset + limit
    return {
        "sources": tuple(found),
        "missing_source_entry_ids": tuple(red.text(m) for m in missing),
        "sources_total": len(distinct),
        "sources_offset": offset,
        "next_sources_offset": end if end < len(distinct) else None,
    }


def _slice(source_ids: Collection[str], window: tuple[int, int]) -> list[str]:
    """The distinct cited ids of one window, in citation order: the ones a call reads."""
    offset, limit = window
    return list(dict.fromkeys(source_ids))[offset : offset + limit]
