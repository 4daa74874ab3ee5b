"""Append-time validation of memory records: one function every adapter calls."""

from __future__ import annotations

from typing import Any

import pytest

from prism_om.core.validation import (
    BranchFacts,
    IdRequirement,
    MemoryRecordNeeds,
    branch_facts_from_entries,
    memory_record_needs,
    validate_memory_record,
    validate_memory_record_on_branch,
)
from prism_om.entries import SessionEntry, compaction_entry, custom_entry, message_entry
from prism_om.errors import MemoryRecordError, StoreRuleError

A, B, C = "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"
R1 = "eeeeeeeeeeee"
TS = "2024-05-01T10:00:00Z"


def msg(eid: str, parent: str | None, role: str = "user") -> SessionEntry:
    extra = {"tool_call_id": "c1"} if role == "tool" else {}
    return message_entry("s1", role, "hi", parent_id=parent, entry_id=eid, timestamp=TS, **extra)  # type: ignore[arg-type]


def rec(data: dict[str, Any], eid: str = "new", parent: str | None = "m2") -> SessionEntry:
    return custom_entry("s1", data, parent_id=parent, entry_id=eid, timestamp=TS)


def obs(oid: str = A, sources: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": oid,
        "text": "fact",
        "sourceEntryIds": ["m0"] if sources is None else sources,
        "observedAt": TS,
        **extra,
    }


def observations(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "om.observations.recorded", "observations": list(items), **extra}


def reflections(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "om.reflections.recorded", "reflections": list(items), **extra}


def drop(*ids: str, **extra: Any) -> dict[str, Any]:
    return {"type": "om.observations.dropped", "observationIds": list(ids), **extra}


def folded(**extra: Any) -> dict[str, Any]:
    return {
        "type": "om.folded",
        "version": 1,
        "fullFold": False,
        "observations": [],
        "reflections": [],
        "droppedObservationIds": [],
        **extra,
    }


def compaction(memory: dict[str, Any] | None, parent: str = "m2") -> SessionEntry:
    data: dict[str, Any] = {
        "throughEntryId": parent,
        "keepEntryIds": [],
        "strategy": "x",
        "trigger": "manual",
    }
    if memory is not None:
        data["memory"] = memory
    return compaction_entry("s1", "s", data, parent_id=parent, entry_id="new", timestamp=TS)


@pytest.fixture
def branch() -> list[SessionEntry]:
    """m0 (user), m1 (assistant), note (custom), o1 (records A and B), r1 (R1 over A), m2 (tool)."""
    entries = [msg("m0", None), msg("m1", "m0", "assistant")]
    entries.append(rec({"type": "app.note"}, "note", "m1"))
    entries.append(rec(observations(obs(A), obs(B, ["m0", "m1"])), "o1", "note"))
    entries.append(rec(reflections({"id": R1, "text": "r", "observationIds": [A]}), "r1", "o1"))
    entries.append(msg("m2", "r1", "tool"))
    return entries


# -- accepted untouched -------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry",
    [
        msg("x", "m2"),
        rec({"type": "app.note", "anything": [1, 2]}),
        rec({"type": "om.scope.opened", "id": "task:a", "whatever": True}),
        rec({"type": "om.scope.left"}),
        compaction(None),
        compaction({"type": "not-om", "x": 1}),
    ],
)
def test_entries_that_are_not_memory_records_are_accepted_untouched(
    entry: SessionEntry, branch: list[SessionEntry]
) -> None:
    assert memory_record_needs(entry) is None
    assert validate_memory_record_on_branch(entry, branch) is None


# -- accepted records and their needs -----------------------------------------------------


def test_needs_list_every_id_with_its_field(branch: list[SessionEntry]) -> None:
    entry = rec(observations(obs(C, ["m0", "m2"]), obs("cccccccccccd", ["m1"]), coversUpToId="m2"))
    needs = memory_record_needs(entry)
    assert needs == MemoryRecordNeeds(
        "om.observations.recorded",
        sources=(
            IdRequirement("m0", "data.observations[0].sourceEntryIds[0]"),
            IdRequirement("m2", "data.observations[0].sourceEntryIds[1]"),
            IdRequirement("m1", "data.observations[1].sourceEntryIds[0]"),
        ),
        covered_entries=(IdRequirement("m2", "data.coversUpToId"),),
        new_memory_ids=(
            IdRequirement(C, "data.observations[0].id"),
            IdRequirement("cccccccccccd", "data.observations[1].id"),
        ),
    )
    assert needs.source_entry_ids == {"m0", "m1", "m2"}
    assert needs.memory_ids_to_look_up == {C, "cccccccccccd"}
    assert validate_memory_record_on_branch(entry, branch) == needs

    entry = rec(reflections({"id": C, "text": "r", "observationIds": [A, B]}, coversUpToId="o1"))
    needs = memory_record_needs(entry)
    assert needs is not None
    assert [r.field for r in needs.observation_refs] == [
        "data.reflections[0].observationIds[0]",
        "data.reflections[0].observationIds[1]",
    ]
    assert needs.referenced_observation_ids == {A, B} and needs.new_ids == {C}
    validate_memory_record_on_branch(entry, branch)

    # A drop may name an observation dropped before; an empty drop is a no-op.
    validate_memory_record_on_branch(rec(drop(A, B, coversUpToId="m2")), branch)
    validate_memory_record_on_branch(rec(drop()), branch)
    validate_memory_record_on_branch(compaction(folded(droppedObservationIds=[B])), branch)
    needs = memory_record_needs(compaction(folded(droppedObservationIds=[B])))
    assert needs is not None and needs.record_type == "om.folded"
    assert needs.observation_refs == (IdRequirement(B, "data.memory.droppedObservationIds[0]"),)


def test_two_phase_api_with_facts_from_elsewhere(branch: list[SessionEntry]) -> None:
    """A SQL adapter answers the needs with queries; the same facts give the same verdict."""
    entry = rec(reflections({"id": C, "text": "r", "observationIds": [A, B]}))
    needs = memory_record_needs(entry)
    assert needs is not None
    facts = branch_facts_from_entries(branch, needs)
    assert facts == BranchFacts(recorded_observation_ids=frozenset({A, B}))
    validate_memory_record(entry, needs, facts)
    with pytest.raises(MemoryRecordError, match=r"observationIds\[1\] 'bbbbbbbbbbbb'"):
        validate_memory_record(entry, needs, BranchFacts(recorded_observation_ids=frozenset({A})))
    with pytest.raises(
        MemoryRecordError, match=r"reflections\[0\]\.id 'cccccccccccc' is already recorded"
    ):
        validate_memory_record(
            entry,
            needs,
            BranchFacts(
                recorded_observation_ids=frozenset({A, B}), recorded_reflection_ids=frozenset({C})
            ),
        )


# -- malformed records --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (observations(obs("ABCDEFABCDEF")), r"data\.observations\[0\]\.id"),
        (observations(obs("abc")), r"data\.observations\[0\]\.id"),
        (observations(obs(sources=[])), r"sourceEntryIds"),
        (observations(obs(sources=["m0", "m0"])), r"sourceEntryIds.*twice"),
        (observations(obs(sources=[""])), r"sourceEntryIds"),
        (observations(obs(A), obs(A)), r"observations.*twice"),
        (observations(obs(text="")), r"text"),
        (observations(obs(priority="urgent")), r"priority"),
        (observations(obs(observedAt="yesterday")), r"observedAt"),
        (observations(obs(referencedDate="next tuesday")), r"referencedDate"),
        (observations(obs(extra_key=1)), r"extra_key"),
        (observations(obs(), coversUpToId=""), r"coversUpToId"),
        (observations(obs(), coversUpToId=5), r"coversUpToId"),
        (observations(obs(), covers_up_to_id="m0"), r"covers_up_to_id"),  # the wire is camelCase
        ({"type": "om.observations.recorded", "observations": "nope"}, r"observations"),
        (reflections({"id": R1, "text": "r", "observationIds": []}), r"observationIds"),
        (reflections({"id": R1, "text": "r"}), r"observationIds"),
        (reflections({"id": R1, "text": "r", "observationIds": ["xyz"]}), r"observationIds\[0\]"),
        (reflections({"id": R1, "text": "r", "observationIds": [A, A]}), r"observationIds.*twice"),
        (
            reflections(
                {"id": C, "text": "r", "observationIds": [A]},
                {"id": C, "text": "s", "observationIds": [A]},
            ),
            r"twice",
        ),
        (drop("not-hex"), r"observationIds\[0\]"),
        (drop(A, A), r"observationIds.*twice"),
        ({"type": "om.observations.recordd"}, r"unknown memory record type"),
        ({"type": "om.folded"}, r"belongs in a compaction"),
    ],
)
def test_malformed_records_fail_before_any_branch_lookup(data: dict[str, Any], field: str) -> None:
    with pytest.raises(MemoryRecordError, match=field):
        memory_record_needs(rec(data))


@pytest.mark.parametrize(
    ("memory", "field"),
    [
        (folded(version=2), r"data\.memory\.version"),
        (folded(fullFold="yes"), r"fullFold"),
        (folded(droppedObservationIds=["nothex"]), r"droppedObservationIds\[0\]"),
        (folded(droppedObservationIds=[A, A]), r"twice"),
        (folded(observations=[obs(A)], droppedObservationIds=[A]), r"twice"),
        (
            folded(
                observations=[obs(A)], reflections=[{"id": A, "text": "r", "observationIds": [B]}]
            ),
            r"twice",
        ),
        (folded(unexpected=1), r"unexpected"),
    ],
)
def test_malformed_folded_details_fail(memory: dict[str, Any], field: str) -> None:
    with pytest.raises(MemoryRecordError, match=field):
        memory_record_needs(compaction(memory))


def test_memory_record_error_is_a_store_rule_error() -> None:
    assert issubclass(MemoryRecordError, StoreRuleError)


# -- records the branch does not support --------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            rec(observations(obs(C, ["ghost"]))),
            r"sourceEntryIds\[0\] 'ghost' is not a user, assistant or tool",
        ),
        (rec(observations(obs(C, ["m0", "note"]))), r"sourceEntryIds\[1\] 'note' is not a user"),
        (rec(observations(obs(C, ["o1"]))), r"'o1' is not a user"),
        (
            rec(observations(obs(C), coversUpToId="ghost")),
            r"data\.coversUpToId 'ghost' is not an entry",
        ),
        (
            rec(observations(obs(A))),
            r"data\.observations\[0\]\.id 'aaaaaaaaaaaa' is already recorded",
        ),
        (rec(observations(obs(R1))), r"'eeeeeeeeeeee' is already recorded"),
        (
            rec(reflections({"id": A, "text": "r", "observationIds": [B]})),
            r"reflections\[0\]\.id 'aaaaaaaaaaaa' is already",
        ),
        (
            rec(reflections({"id": C, "text": "r", "observationIds": [R1]})),
            r"'eeeeeeeeeeee' is not an observation recorded",
        ),
        (
            rec(reflections({"id": C, "text": "r", "observationIds": ["dddddddddddd"]})),
            r"not an observation recorded",
        ),
        (
            rec(drop(A, "dddddddddddd")),
            r"data\.observationIds\[1\] 'dddddddddddd' is not an observation",
        ),
        (rec(drop(A, coversUpToId="later")), r"coversUpToId 'later'"),
        (
            compaction(folded(droppedObservationIds=[C])),
            r"droppedObservationIds\[0\] 'cccccccccccc'",
        ),
    ],
)
def test_records_the_branch_does_not_support_fail_closed(
    entry: SessionEntry, message: str, branch: list[SessionEntry]
) -> None:
    with pytest.raises(MemoryRecordError, match=message) as info:
        validate_memory_record_on_branch(entry, branch)
    assert "entry 'new'" in str(info.value)


def test_sources_must_lie_before_the_record_on_its_own_branch(branch: list[SessionEntry]) -> None:
    # m2 exists, but only after the prefix the record is appended to.
    entry = rec(observations(obs(C, ["m2"])), parent="r1")
    with pytest.raises(MemoryRecordError, match="'m2'"):
        validate_memory_record_on_branch(entry, branch[:5])
    validate_memory_record_on_branch(entry, branch)
    # Memory recorded on a sibling branch is unknown here.
    with pytest.raises(MemoryRecordError, match="not an observation recorded"):
        validate_memory_record_on_branch(rec(drop(A)), branch[:3])
