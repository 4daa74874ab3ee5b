"""Append-time validation of memory records, shared by every store adapter.

Two phases, so that a SQL store can answer the branch questions with indexed queries
instead of loading the branch:

1. ``memory_record_needs(entry)`` checks the record on its own (shape, 12-hex ids, no id
   twice, non-empty sources and supports; see :mod:`.records` and :mod:`.parse`) and lists
   what the branch must confirm. ``None`` means the entry is no memory record: messages,
   other custom types, ``om.scope.*`` records (validated by the work-scope index) and
   compactions without ``om.folded`` details are accepted untouched.
2. The adapter gathers ``BranchFacts`` about the branch *before* the entry (the path from
   the root to the entry's parent, plus the earlier entries of the same batch) and calls
   ``validate_memory_record(entry, needs, facts)``.

What the branch must confirm:

=====================  ===================================================================
``sources``            each is an eligible (user/assistant/tool) message entry on the branch
``covered_entries``    each (a ``coversUpToId``) is an entry on the branch
``observation_refs``   each (reflection supports, drop ids, a fold's trimmed ids) is an
                       observation recorded on the branch; dropped ones count
``new_memory_ids``     none is recorded on the branch yet, as an observation or a
                       reflection (one namespace: recall takes a bare id)
``reflection_refs``    each (a ``supersedesReflectionIds`` item) is a reflection recorded
                       on the branch and not superseded there yet: a reflection is
                       superseded at most once, so consolidations form a forest and the
                       withholding of revoked memory can follow it
=====================  ===================================================================

Errors are ``MemoryRecordError`` naming the entry, the field and the offending id; the
first failing requirement in record order is reported.

``check_memory_record_caps(entry)`` runs first, on every append (``check_batch_shape``):
an observation citing more than ``MAX_SOURCES_PER_OBSERVATION`` sources or a reflection
over more than ``MAX_OBSERVATIONS_PER_REFLECTION`` observations (or superseding more than
``MAX_SUPERSEDED_PER_REFLECTION`` reflections) is refused with
``MemoryRecordTooLargeError`` (see :mod:`.limits`), so validating one record stays bounded.
It is an append rule, not a wire rule: records stored before the caps existed still load.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from ..entries import SessionEntry
from ..errors import MemoryRecordError, MemoryRecordTooLargeError
from .limits import (
    MAX_OBSERVATIONS_PER_REFLECTION,
    MAX_SOURCES_PER_OBSERVATION,
    MAX_SUPERSEDED_PER_REFLECTION,
)
from .parse import MemoryRecord, parse_memory_record
from .records import (
    FOLDED_TYPE,
    OBSERVATIONS_DROPPED,
    OBSERVATIONS_RECORDED,
    REFLECTIONS_RECORDED,
    FoldedMemory,
    ObservationsDropped,
    ObservationsRecorded,
    ReflectionsRecorded,
)
from .sources import is_eligible_observation_source_entry

__all__ = [
    "MemoryRecordNeeds",
    "branch_facts_from_entries",
    "check_memory_record_caps",
    "memory_record_needs",
    "record_needs",
    "validate_memory_record",
    "validate_memory_record_on_branch",
]


@dataclass(frozen=True)
class IdRequirement:
    """One id the branch must confirm, and the wire field it came from."""

    value: str
    field: str
    """Path of the id inside the entry, e.g. ``data.observations[0].sourceEntryIds[1]``."""


@dataclass(frozen=True)
class MemoryRecordNeeds:
    """What a memory record asks of the branch, in record order."""

    record_type: str
    """``om.observations.recorded`` / ``om.reflections.recorded`` / ``om.observations.dropped``
    or ``om.folded`` (a compaction's details)."""
    sources: tuple[IdRequirement, ...] = ()
    covered_entries: tuple[IdRequirement, ...] = ()
    observation_refs: tuple[IdRequirement, ...] = ()
    new_memory_ids: tuple[IdRequirement, ...] = ()
    reflection_refs: tuple[IdRequirement, ...] = ()

    # The id sets an adapter looks up; derived, so not part of equality.

    @cached_property
    def source_entry_ids(self) -> frozenset[str]:
        """Entry ids that must be eligible messages on the branch."""
        return frozenset(r.value for r in self.sources)

    @cached_property
    def covered_entry_ids(self) -> frozenset[str]:
        """Entry ids that must lie on the branch."""
        return frozenset(r.value for r in self.covered_entries)

    @cached_property
    def referenced_observation_ids(self) -> frozenset[str]:
        """Memory ids that must be recorded observations on the branch."""
        return frozenset(r.value for r in self.observation_refs)

    @cached_property
    def new_ids(self) -> frozenset[str]:
        """Memory ids this record mints; none may be recorded on the branch yet."""
        return frozenset(r.value for r in self.new_memory_ids)

    @cached_property
    def referenced_reflection_ids(self) -> frozenset[str]:
        """Memory ids that must be recorded, not yet superseded reflections on the branch."""
        return frozenset(r.value for r in self.reflection_refs)

    @cached_property
    def memory_ids_to_look_up(self) -> frozenset[str]:
        """Every memory id whose recorded kind on the branch ``BranchFacts`` must report."""
        return self.referenced_observation_ids | self.new_ids | self.referenced_reflection_ids


@dataclass(frozen=True)
class BranchFacts:
    """Answers about the branch before the entry, limited to the ids the needs name."""

    eligible_source_ids: frozenset[str] = frozenset()
    """Of ``needs.source_entry_ids``: those that are user/assistant/tool message entries."""
    entry_ids_on_branch: frozenset[str] = frozenset()
    """Of ``needs.covered_entry_ids``: those that are entries of the branch."""
    recorded_observation_ids: frozenset[str] = frozenset()
    """Of ``needs.memory_ids_to_look_up``: those recorded as observations on the branch."""
    recorded_reflection_ids: frozenset[str] = frozenset()
    """Of ``needs.memory_ids_to_look_up``: those recorded as reflections on the branch."""
    superseded_reflection_ids: frozenset[str] = frozenset()
    """Of ``needs.referenced_reflection_ids``: those a reflection on the branch supersedes."""


def memory_record_needs(entry: SessionEntry) -> MemoryRecordNeeds | None:
    """Check a record's own shape and list what the branch must confirm (None: no record)."""
    return record_needs(parse_memory_record(entry))


def record_needs(record: MemoryRecord | None) -> MemoryRecordNeeds | None:
    """``memory_record_needs`` of a record already parsed by ``parse_memory_record``."""
    if record is None:
        return None
    if isinstance(record, ObservationsRecorded):
        return MemoryRecordNeeds(
            OBSERVATIONS_RECORDED,
            sources=tuple(
                IdRequirement(source, f"data.observations[{i}].sourceEntryIds[{j}]")
                for i, obs in enumerate(record.observations)
                for j, source in enumerate(obs.source_entry_ids)
            ),
            covered_entries=_cover(record.covers_up_to_id),
            new_memory_ids=tuple(
                IdRequirement(obs.id, f"data.observations[{i}].id")
                for i, obs in enumerate(record.observations)
            ),
        )
    if isinstance(record, ReflectionsRecorded):
        return MemoryRecordNeeds(
            REFLECTIONS_RECORDED,
            covered_entries=_cover(record.covers_up_to_id),
            observation_refs=tuple(
                IdRequirement(obs_id, f"data.reflections[{i}].observationIds[{j}]")
                for i, refl in enumerate(record.reflections)
                for j, obs_id in enumerate(refl.observation_ids)
            ),
            new_memory_ids=tuple(
                IdRequirement(refl.id, f"data.reflections[{i}].id")
                for i, refl in enumerate(record.reflections)
            ),
            reflection_refs=tuple(
                IdRequirement(old, f"data.reflections[{i}].supersedesReflectionIds[{j}]")
                for i, refl in enumerate(record.reflections)
                for j, old in enumerate(refl.supersedes_reflection_ids or ())
            ),
        )
    if isinstance(record, ObservationsDropped):
        return MemoryRecordNeeds(
            OBSERVATIONS_DROPPED,
            covered_entries=_cover(record.covers_up_to_id),
            observation_refs=tuple(
                IdRequirement(obs_id, f"data.observationIds[{i}]")
                for i, obs_id in enumerate(record.observation_ids)
            ),
        )
    assert isinstance(record, FoldedMemory)
    # The folded observations and reflections are copies of recorded memory, not new
    # records; only the ids the fold will treat as dropped must name real observations.
    return MemoryRecordNeeds(
        FOLDED_TYPE,
        observation_refs=tuple(
            IdRequirement(obs_id, f"data.memory.droppedObservationIds[{i}]")
            for i, obs_id in enumerate(record.dropped_observation_ids)
        ),
    )


_CAPPED_LISTS: dict[str, tuple[str, tuple[tuple[str, int, str], ...]]] = {
    OBSERVATIONS_RECORDED: (
        "observations",
        (("sourceEntryIds", MAX_SOURCES_PER_OBSERVATION, "MAX_SOURCES_PER_OBSERVATION"),),
    ),
    REFLECTIONS_RECORDED: (
        "reflections",
        (
            ("observationIds", MAX_OBSERVATIONS_PER_REFLECTION, "MAX_OBSERVATIONS_PER_REFLECTION"),
            (
                "supersedesReflectionIds",
                MAX_SUPERSEDED_PER_REFLECTION,
                "MAX_SUPERSEDED_PER_REFLECTION",
            ),
        ),
    ),
}


def check_memory_record_caps(entry: SessionEntry) -> None:
    """Raise ``MemoryRecordTooLargeError`` when a record cites more ids than its cap.

    Reads the raw payload (a few ``len`` calls), so it is cheap enough for every append;
    the record's shape is checked later by ``memory_record_needs``.
    """
    capped = _CAPPED_LISTS.get(entry.custom_type or "")
    if capped is None or entry.data is None:
        return
    key, fields = capped
    items = entry.data.get(key)
    if not isinstance(items, list):
        return
    for i, item in enumerate(items):
        for field, cap, cap_name in fields:
            ids = item.get(field) if isinstance(item, dict) else None
            if isinstance(ids, list) and len(ids) > cap:
                raise MemoryRecordTooLargeError(
                    f"entry {entry.id!r} ({entry.custom_type}): data.{key}[{i}].{field} of "
                    f"{item.get('id')!r} lists {len(ids)} ids, above the hard cap of {cap} "
                    f"({cap_name})",
                    entry_id=entry.id,
                    session_id=entry.session_id,
                    memory_id=_str_or_none(item.get("id")),
                )


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _cover(covers_up_to_id: str | None) -> tuple[IdRequirement, ...]:
    return () if covers_up_to_id is None else (IdRequirement(covers_up_to_id, "data.coversUpToId"),)


def validate_memory_record(
    entry: SessionEntry, needs: MemoryRecordNeeds, facts: BranchFacts
) -> None:
    """Raise ``MemoryRecordError`` unless the branch facts satisfy every need."""
    label = f"entry {entry.id!r} ({needs.record_type})"
    context = {"entry_id": entry.id, "session_id": entry.session_id}
    for req in needs.sources:
        if req.value not in facts.eligible_source_ids:
            raise MemoryRecordError(
                f"{label}: {req.field} {req.value!r} is not a user, assistant or tool "
                "message entry earlier on this branch",
                **context,
            )
    for req in needs.covered_entries:
        if req.value not in facts.entry_ids_on_branch:
            raise MemoryRecordError(
                f"{label}: {req.field} {req.value!r} is not an entry earlier on this branch",
                **context,
            )
    for req in needs.observation_refs:
        if req.value not in facts.recorded_observation_ids:
            raise MemoryRecordError(
                f"{label}: {req.field} {req.value!r} is not an observation recorded on this branch",
                memory_id=req.value,
                **context,
            )
    for req in needs.new_memory_ids:
        if (
            req.value in facts.recorded_observation_ids
            or req.value in facts.recorded_reflection_ids
        ):
            raise MemoryRecordError(
                f"{label}: {req.field} {req.value!r} is already recorded on this branch",
                memory_id=req.value,
                **context,
            )
    for req in needs.reflection_refs:
        if req.value not in facts.recorded_reflection_ids:
            raise MemoryRecordError(
                f"{label}: {req.field} {req.value!r} is not a reflection recorded earlier "
                "on this branch",
                memory_id=req.value,
                **context,
            )
        if req.value in facts.superseded_reflection_ids:
            raise MemoryRecordError(
                f"{label}: {req.field} {req.value!r} is already superseded on this branch "
                "(a reflection is superseded once; supersede its successor instead)",
                memory_id=req.value,
                **context,
            )


def branch_facts_from_entries(
    branch_entries: Iterable[SessionEntry], needs: MemoryRecordNeeds
) -> BranchFacts:
    """Gather ``BranchFacts`` from the entries before the record (root first). O(n).

    Reads memory ids straight from the stored payloads: entries already on a branch were
    validated when they were appended, so re-parsing them would only cost time.
    """
    sources, covered = needs.source_entry_ids, needs.covered_entry_ids
    lookup = needs.memory_ids_to_look_up
    superseding = needs.referenced_reflection_ids
    eligible: set[str] = set()
    on_branch: set[str] = set()
    observations: set[str] = set()
    reflections: set[str] = set()
    superseded: set[str] = set()
    for entry in branch_entries:
        if entry.id in covered:
            on_branch.add(entry.id)
        if entry.id in sources and is_eligible_observation_source_entry(entry):
            eligible.add(entry.id)
        if lookup and entry.kind == "custom" and entry.data is not None:
            marker = entry.custom_type
            if marker == OBSERVATIONS_RECORDED:
                observations.update(_ids_in(entry.data.get("observations"), lookup))
            elif marker == REFLECTIONS_RECORDED:
                reflections.update(_ids_in(entry.data.get("reflections"), lookup))
                if superseding:
                    superseded.update(_superseded_in(entry.data.get("reflections"), superseding))
    return BranchFacts(
        eligible_source_ids=frozenset(eligible),
        entry_ids_on_branch=frozenset(on_branch),
        recorded_observation_ids=frozenset(observations),
        recorded_reflection_ids=frozenset(reflections),
        superseded_reflection_ids=frozenset(superseded),
    )


def _superseded_in(items: object, wanted: frozenset[str]) -> Iterable[str]:
    if not isinstance(items, list):
        return ()
    return (
        old
        for item in items
        if isinstance(item, dict)
        for old in item.get("supersedesReflectionIds") or ()
        if old in wanted
    )


def _ids_in(items: object, wanted: frozenset[str]) -> Iterable[str]:
    if not isinstance(items, list):
        return ()
    return (item["id"] for item in items if isinstance(item, dict) and item.get("id") in wanted)


def validate_memory_record_on_branch(
    entry: SessionEntry, branch_entries: Iterable[SessionEntry]
) -> MemoryRecordNeeds | None:
    """Validate ``entry`` against the entries before it; returns its needs (None: no record)."""
    needs = memory_record_needs(entry)
    if needs is not None:
        validate_memory_record(entry, needs, branch_facts_from_entries(branch_entries, needs))
    return needs
