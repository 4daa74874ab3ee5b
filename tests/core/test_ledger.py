"""The ledger fold, coverage windows and projections of observational memory."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism_om import (
    ObservationalMemoryLedger,
    RecordedObservation,
    RecordedReflection,
    eligible_observation_sources,
    is_eligible_observation_source_entry,
)
from prism_om.core.ledger import Coverage, extend_observational_memory_ledger
from prism_om.core.validation import validate_memory_record_on_branch
from prism_om.entries import SessionEntry, compaction_entry, custom_entry, message_entry
from prism_om.errors import EntryNotFoundError, MemoryRecordError
from prism_om.observational_memory import (
    build_observational_memory_projection,
    fold_observational_memory_ledger,
    observations_uncovered_by_reflection,
    unscanned_entries,
)
from prism_om.testing.om_factories import BranchBuilder, branch_builders, random_builder

A, B, C, D = "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc", "dddddddddddd"
R1, R2 = "eeeeeeeeeeee", "ffffffffffff"


def obs(
    oid: str, *sources: str, priority: str = "medium", at: str = "2024-05-01T10:00:00Z"
) -> dict[str, Any]:
    return {
        "id": oid,
        "text": f"fact {oid[:2]}",
        "sourceEntryIds": list(sources),
        "observedAt": at,
        "priority": priority,
    }


def refl(rid: str, *supports: str) -> dict[str, Any]:
    return {"id": rid, "text": f"reflection {rid[:2]}", "observationIds": list(supports)}


class Chain:
    """Hand-built branches, including ones no store would accept."""

    def __init__(self) -> None:
        self.entries: list[SessionEntry] = []

    def _ids(self) -> tuple[str, str | None, str]:
        n = len(self.entries)
        return (
            f"e{n:03d}",
            (self.entries[-1].id if self.entries else None),
            f"2024-05-01T{9 + n // 60:02d}:{n % 60:02d}:00Z",
        )

    def msg(self, role: str = "user", text: str = "hello") -> str:
        eid, parent, ts = self._ids()
        extra = {"tool_call_id": "call_1"} if role == "tool" else {}
        self.entries.append(
            message_entry("s1", role, text, parent_id=parent, entry_id=eid, timestamp=ts, **extra)
        )  # type: ignore[arg-type]
        return eid

    def custom(self, data: dict[str, Any]) -> str:
        eid, parent, ts = self._ids()
        self.entries.append(custom_entry("s1", data, parent_id=parent, entry_id=eid, timestamp=ts))
        return eid

    def observe(self, *observations: dict[str, Any], covers: str | None = None) -> str:
        data: dict[str, Any] = {
            "type": "om.observations.recorded",
            "observations": list(observations),
        }
        if covers:
            data["coversUpToId"] = covers
        return self.custom(data)

    def reflect(self, *reflections: dict[str, Any], covers: str | None = None) -> str:
        data: dict[str, Any] = {"type": "om.reflections.recorded", "reflections": list(reflections)}
        if covers:
            data["coversUpToId"] = covers
        return self.custom(data)

    def drop(self, *ids: str, covers: str | None = None) -> str:
        data: dict[str, Any] = {"type": "om.observations.dropped", "observationIds": list(ids)}
        if covers:
            data["coversUpToId"] = covers
        return self.custom(data)

    def compact(self, memory: dict[str, Any] | None) -> str:
        eid, parent, ts = self._ids()
        data = {"throughEntryId": parent, "keepEntryIds": [], "strategy": "x", "trigger": "manual"}
        if memory is not None:
            data["memory"] = memory
        self.entries.append(
            compaction_entry("s1", "summary", data, parent_id=parent, entry_id=eid, timestamp=ts)
        )
        return eid


def folded(dropped: list[str]) -> dict[str, Any]:
    return {
        "type": "om.folded",
        "version": 1,
        "fullFold": True,
        "observations": [],
        "reflections": [],
        "droppedObservationIds": dropped,
    }


# -- the fold -----------------------------------------------------------------------------


def test_fold_records_observations_reflections_drops_and_coverage() -> None:
    c = Chain()
    m0, m1 = c.msg(), c.msg("assistant")
    o1 = c.observe(obs(A, m0), obs(B, m0, m1, priority="high"), covers=m1)
    m2 = c.msg("tool")
    r1 = c.reflect(refl(R1, A, B), covers=o1)
    d1 = c.drop(A, covers=m2)
    ledger = fold_observational_memory_ledger(c.entries)

    assert [r.id for r in ledger.observations] == [A, B]
    assert ledger.observations[0] == RecordedObservation(
        ledger.observations[0].observation, o1, c.entries[2].timestamp, 2
    )
    assert [(r.id, r.recorded_entry_id, r.recorded_position) for r in ledger.reflections] == [
        (R1, r1, 4)
    ]
    assert ledger.dropped_observation_ids == (A,)
    assert ledger.observation_coverage == Coverage(m1, o1, 2)
    assert ledger.reflection_coverage == Coverage(o1, r1, 4)
    assert ledger.drop_coverage == Coverage(m2, d1, 5)
    assert (
        ledger.observation_covers_up_to_id,
        ledger.reflection_covers_up_to_id,
        ledger.drop_covers_up_to_id,
    ) == (m1, o1, m2)
    assert (ledger.last_observations_entry_id, ledger.last_reflections_entry_id) == (o1, r1)
    assert [r.id for r in ledger.live_observations()] == [B]


def test_empty_branch_and_branch_without_memory_fold_to_the_empty_ledger() -> None:
    c = Chain()
    c.msg()
    c.custom({"type": "app.note", "x": 1})
    c.custom({"type": "om.scope.opened", "id": "task:a"})
    c.compact(None)
    c.compact({"type": "other.memory", "anything": True})
    assert fold_observational_memory_ledger([]) == ObservationalMemoryLedger()
    assert fold_observational_memory_ledger(c.entries) == ObservationalMemoryLedger()


def test_records_without_covers_up_to_id_do_not_move_coverage() -> None:
    c = Chain()
    m0 = c.msg()
    o1 = c.observe(obs(A, m0), covers=m0)
    r1 = c.reflect(refl(R1, A), covers=o1)
    d1 = c.drop(A, covers=r1)
    c.msg()
    o2 = c.observe(obs(B, m0))  # host-written, no coverage
    r2 = c.reflect(refl(R2, B))
    c.drop(B)  # a revocation tombstone
    ledger = fold_observational_memory_ledger(c.entries)
    assert ledger.observation_coverage == Coverage(m0, o1, 1)
    assert ledger.reflection_coverage == Coverage(o1, r1, 2)
    assert ledger.drop_coverage == Coverage(r1, d1, 3)
    # ... yet the records count, and are the latest of their type.
    assert ledger.dropped_observation_ids == (A, B)
    assert (ledger.last_observations_entry_id, ledger.last_reflections_entry_id) == (o2, r2)


def test_empty_observer_pass_still_advances_coverage() -> None:
    c = Chain()
    m0 = c.msg()
    o1 = c.observe(covers=m0)
    ledger = fold_observational_memory_ledger(c.entries)
    assert ledger.observations == ()
    assert ledger.observation_coverage == Coverage(m0, o1, 1)
    assert unscanned_entries(c.entries) == [c.entries[1]]


def test_duplicates_first_record_wins_and_ids_share_one_namespace() -> None:
    c = Chain()
    m0 = c.msg()
    c.observe(obs(A, m0))
    c.observe({**obs(A, m0), "text": "second copy"}, obs(R1, m0))
    c.reflect(refl(R1, A), refl(B, A))  # R1 is taken by an observation already
    c.reflect({**refl(B, A), "text": "again"})
    ledger = fold_observational_memory_ledger(c.entries)
    assert [(r.id, r.observation.text) for r in ledger.observations] == [
        (A, "fact aa"),
        (R1, "fact ee"),
    ]
    assert [(r.id, r.reflection.text) for r in ledger.reflections] == [(B, "reflection bb")]


def test_drops_of_unrecorded_reflection_or_repeated_ids_are_ignored() -> None:
    c = Chain()
    m0 = c.msg()
    c.drop(A)  # not recorded yet
    c.observe(obs(A, m0), obs(B, m0))
    c.reflect(refl(R1, A))
    c.drop(B, R1, C)  # R1 is a reflection, C unknown
    c.drop(B, A)
    ledger = fold_observational_memory_ledger(c.entries)
    assert ledger.dropped_observation_ids == (B, A)


def test_compaction_trimmed_ids_count_as_dropped_without_moving_coverage() -> None:
    c = Chain()
    m0 = c.msg()
    c.observe(obs(A, m0), obs(B, m0), covers=m0)
    c.compact(folded([B, D]))  # D was never recorded: ignored
    c.drop(A)
    ledger = fold_observational_memory_ledger(c.entries)
    assert ledger.dropped_observation_ids == (B, A)
    assert ledger.drop_coverage is None
    assert ledger.observation_covers_up_to_id == m0


def test_malformed_and_unknown_memory_records_raise() -> None:
    c = Chain()
    m0 = c.msg()
    c.observe({**obs(A, m0), "id": "NOT-HEX"})
    with pytest.raises(MemoryRecordError, match=r"data\.observations\[0\]\.id"):
        fold_observational_memory_ledger(c.entries)
    for bad in ({"type": "om.observations.recordd"}, {"type": "om.folded"}):
        c2 = Chain()
        c2.msg()
        c2.custom(bad)
        with pytest.raises(MemoryRecordError, match="unknown memory record type"):
            fold_observational_memory_ledger(c2.entries)
    c3 = Chain()
    c3.msg()
    c3.compact({**folded([]), "version": 2})
    with pytest.raises(MemoryRecordError, match=r"data\.memory\.version"):
        fold_observational_memory_ledger(c3.entries)


def test_ledger_rebuilt_field_by_field_compares_equal() -> None:
    """What a SQL adapter does: one row per recorded item, keyed by the recording entry."""
    builder = random_builder(7, 120)
    ledger = fold_observational_memory_ledger(builder.path)
    assert ledger.observations and ledger.dropped_observation_ids
    rows = [
        (
            r.observation.model_dump(by_alias=True, mode="json"),
            r.recorded_entry_id,
            r.recorded_at,
            r.recorded_position,
        )
        for r in ledger.observations
    ]
    rebuilt = ObservationalMemoryLedger(
        observations=tuple(
            RecordedObservation(type(ledger.observations[0].observation).model_validate(o), *rest)
            for o, *rest in rows
        ),
        reflections=tuple(
            RecordedReflection(
                r.reflection.model_copy(), r.recorded_entry_id, r.recorded_at, r.recorded_position
            )
            for r in ledger.reflections
        ),
        **{
            f.name: getattr(ledger, f.name)
            for f in fields(ledger)
            if f.name not in ("observations", "reflections")
        },
    )
    assert rebuilt == ledger
    # Cached views are not part of equality.
    _ = ledger.observations_by_id
    assert rebuilt == ledger
    # Positions are branch depths: the recording entry sits at that index.
    for r in ledger.observations:
        assert builder.path[r.recorded_position].id == r.recorded_entry_id


# -- property tests -----------------------------------------------------------------------

PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(branch_builders(max_steps=50))
def test_fold_matches_the_builders_own_model(builder: BranchBuilder) -> None:
    ledger = fold_observational_memory_ledger(builder.path)
    model = builder.model
    assert tuple(r.observation for r in ledger.observations) == model.observations
    assert tuple(r.reflection for r in ledger.reflections) == model.reflections
    assert ledger.dropped_observation_ids == model.dropped
    assert ledger.observation_covers_up_to_id == model.observation_cover
    assert ledger.reflection_covers_up_to_id == model.reflection_cover
    assert ledger.drop_covers_up_to_id == model.drop_cover


@PROPS
@given(branch_builders(max_steps=50))
def test_fold_is_deterministic_and_dropped_is_a_subset_of_recorded(builder: BranchBuilder) -> None:
    path = builder.path
    ledger = fold_observational_memory_ledger(path)
    assert fold_observational_memory_ledger(list(path)) == ledger
    assert fold_observational_memory_ledger(iter(path)) == ledger
    recorded = [r.id for r in ledger.observations]
    assert len(set(recorded)) == len(recorded)
    assert len(set(ledger.dropped_observation_ids)) == len(ledger.dropped_observation_ids)
    assert set(ledger.dropped_observation_ids) <= set(recorded)
    assert not set(recorded) & {r.id for r in ledger.reflections}
    assert [r.recorded_position for r in ledger.observations] == sorted(
        r.recorded_position for r in ledger.observations
    )


@PROPS
@given(branch_builders(max_steps=50), st.data())
def test_folding_a_prefix_then_continuing_equals_folding_the_whole(
    builder: BranchBuilder, data: st.DataObject
) -> None:
    path = builder.path
    cut = data.draw(st.integers(0, len(path)))
    head = fold_observational_memory_ledger(path[:cut])
    assert extend_observational_memory_ledger(
        head, path[cut:], first_position=cut
    ) == fold_observational_memory_ledger(path)


@PROPS
@given(branch_builders(max_steps=50), st.data())
def test_active_is_recorded_minus_dropped_minus_invalidated(
    builder: BranchBuilder, data: st.DataObject
) -> None:
    path = builder.path
    ledger = fold_observational_memory_ledger(path)
    candidates = sorted(
        {r.id for r in ledger.observations}
        | {r.id for r in ledger.reflections}
        | {e.id for e in path}
    )
    invalidated = (
        set(data.draw(st.lists(st.sampled_from(candidates), max_size=4))) if candidates else set()
    )
    projection = build_observational_memory_projection(path, invalidated_ids=invalidated)

    def withheld(o: Any) -> bool:
        return o.id in invalidated or bool(set(o.source_entry_ids) & invalidated)

    expected = [
        r.observation
        for r in ledger.observations
        if r.id not in ledger.dropped_observation_ids and not withheld(r.observation)
    ]
    assert list(projection.active_observations) == expected
    bad_obs = {r.id for r in ledger.observations if withheld(r.observation)} | invalidated
    assert list(projection.active_reflections) == [
        r.reflection
        for r in ledger.reflections
        if r.id not in invalidated and not set(r.reflection.observation_ids) & bad_obs
    ]
    assert projection.ledger == ledger
    assert projection.folded.observations == expected
    assert all(o in projection.active_observations for o in projection.visible_observations)


@PROPS
@given(branch_builders(max_steps=50))
def test_every_generated_record_passes_append_validation(builder: BranchBuilder) -> None:
    # Every entry of every branch of the tree, checked against its own branch prefix.
    by_id = {e.id: e for e in builder.entries}
    for entry in builder.entries:
        prefix: list[SessionEntry] = []
        parent = entry.parent_id
        while parent is not None:
            prefix.append(by_id[parent])
            parent = by_id[parent].parent_id
        validate_memory_record_on_branch(entry, prefix[::-1])


# -- coverage windows ---------------------------------------------------------------------


def test_eligible_sources_are_user_assistant_and_tool_messages_only() -> None:
    c = Chain()
    c.msg("user")
    c.msg("assistant")
    c.msg("tool")
    c.custom({"type": "app.note"})
    c.observe()
    c.compact(None)
    assert [is_eligible_observation_source_entry(e) for e in c.entries] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    assert eligible_observation_sources(c.entries) == c.entries[:3]


def test_unscanned_entries_follow_the_observation_cursor() -> None:
    c = Chain()
    m0 = c.msg()
    c.msg()
    assert unscanned_entries(c.entries) == c.entries
    c.observe(obs(A, m0), covers=m0)
    m3 = c.msg()
    ledger = fold_observational_memory_ledger(c.entries)
    # Bookkeeping entries after the cursor are unscanned too: scanning past them is progress.
    assert [e.id for e in unscanned_entries(c.entries)] == ["e001", "e002", m3]
    assert unscanned_entries(c.entries, ledger) == unscanned_entries(c.entries)
    assert [e.id for e in eligible_observation_sources(unscanned_entries(c.entries))] == [
        "e001",
        m3,
    ]
    with pytest.raises(EntryNotFoundError, match="coverage cursor"):
        unscanned_entries(c.entries[2:], ledger)


def test_observations_uncovered_by_reflection() -> None:
    c = Chain()
    m0 = c.msg()
    o1 = c.observe(obs(A, m0), obs(B, m0), covers=m0)
    assert [o.id for o in observations_uncovered_by_reflection(c.entries)] == [A, B]
    c.reflect(refl(R1, A), covers=o1)
    c.observe(obs(C, m0), covers=m0)
    c.reflect(refl(R2, C))  # no coverage: the window stays open
    c.observe(obs(D, m0), covers=m0)
    c.drop(D)
    ledger = fold_observational_memory_ledger(c.entries)
    assert [o.id for o in observations_uncovered_by_reflection(c.entries)] == [C]
    assert observations_uncovered_by_reflection(ledger) == observations_uncovered_by_reflection(
        c.entries
    )
    assert observations_uncovered_by_reflection(ledger, invalidated_ids={m0}) == []


# -- projection ---------------------------------------------------------------------------


def test_projection_invalidation_visibility_and_folded() -> None:
    c = Chain()
    m0, m1, m2 = c.msg(), c.msg(), c.msg()
    c.observe(obs(A, m0), obs(B, m1), obs(C, m1, m2), obs(D, m2), covers=m2)
    c.reflect(refl(R1, A), refl(R2, C, D))
    c.drop(D)
    p = build_observational_memory_projection(c.entries)
    assert [o.id for o in p.active_observations] == [A, B, C]
    # A reflection over a merely dropped observation stays active.
    assert [r.id for r in p.active_reflections] == [R1, R2]
    assert p.folded.observations == list(p.active_observations)
    assert p.folded.dropped_observation_ids == [] and p.folded.full_fold is False

    p = build_observational_memory_projection(c.entries, invalidated_ids={m0})
    assert [o.id for o in p.active_observations] == [B, C]
    assert [r.id for r in p.active_reflections] == [R2]
    assert [r.id for r in p.ledger.reflections] == [R1, R2]  # the full ledger stays for audit
    # Revoking a source of an observation that was dropped still withholds reflections on it.
    p = build_observational_memory_projection(c.entries, invalidated_ids={m2})
    assert [o.id for o in p.active_observations] == [A, B]
    assert [r.id for r in p.active_reflections] == [R1]
    p = build_observational_memory_projection(c.entries, invalidated_ids={B, R1})
    assert [o.id for o in p.active_observations] == [A, C]
    assert [r.id for r in p.active_reflections] == [R2]

    p = build_observational_memory_projection(c.entries, recent_entry_ids=[m1, m2])
    # B rests only on a recent message; C only partly (m1, m2 both recent -> hidden too).
    assert [o.id for o in p.visible_observations] == [A]
    p = build_observational_memory_projection(c.entries, recent_entry_ids=[m2])
    assert [o.id for o in p.visible_observations] == [A, B, C]
    assert p.visible_reflections == p.active_reflections


def test_projection_accepts_a_folded_ledger() -> None:
    builder = random_builder(3, 80)
    ledger = fold_observational_memory_ledger(builder.path)
    assert build_observational_memory_projection(ledger) == build_observational_memory_projection(
        builder.path
    )
