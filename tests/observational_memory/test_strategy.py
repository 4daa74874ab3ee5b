"""The observational-memory compaction strategy and the folded details it stores."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from prism_om.core.limits import FOLDED_PAYLOAD_MAX_BYTES
from prism_om.core.validation import validate_memory_record_on_branch
from prism_om.entries import SessionEntry
from prism_om.errors import (
    InvalidEntryError,
    InvalidInputError,
    LimitExceededError,
    SessionMismatchError,
)
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    build_observational_memory_projection,
    create_folded_memory_details,
    create_observational_memory_compaction_strategy,
    fold_observational_memory_ledger,
    select_recent_message_entries,
)
from prism_om.observational_memory.folded import folded_payload_bytes
from prism_om.testing.om_factories import BranchBuilder, branch_builders, random_builder
from prism_om.tokens import get_estimator

HEURISTIC = get_estimator("chars/4")


def session(observations: int = 6, *, text_size: int = 40) -> BranchBuilder:
    """Messages, then observations with rising time and cycling priority, then more messages."""
    b = BranchBuilder()
    sources = [b.message("user", f"message {i}").id for i in range(4)]
    for i in range(observations):
        b.observe(
            1,
            sources=[sources[i % 4]],
            priority=("low", "medium", "high")[i % 3],
            text=f"fact {i} " + "z" * text_size,
        )
    b.reflect(1)
    for i in range(3):
        b.message("assistant", f"later {i}")
    return b


def test_compaction_entry_shape() -> None:
    b = session()
    strategy = create_observational_memory_compaction_strategy(keep_recent_entries=3)
    entry = strategy.compact(
        b.path, session_id="s1", trigger="tokens", entry_id="c1", timestamp="2024-06-01T00:00:00Z"
    )
    assert (entry.kind, entry.id, entry.session_id, entry.timestamp) == (
        "compaction",
        "c1",
        "s1",
        "2024-06-01T00:00:00Z",
    )
    assert entry.parent_id == b.path[-1].id
    assert entry.data is not None
    assert set(entry.data) == {"throughEntryId", "keepEntryIds", "strategy", "trigger", "memory"}
    assert entry.data["throughEntryId"] == b.path[-1].id
    assert entry.data["keepEntryIds"] == [e.id for e in select_recent_message_entries(b.path, 3)]
    assert (entry.data["strategy"], entry.data["trigger"]) == ("observational-memory", "tokens")
    memory = entry.data["memory"]
    projection = build_observational_memory_projection(b.path)
    assert memory == create_folded_memory_details(projection)
    assert memory["type"] == "om.folded" and memory["version"] == 1 and memory["fullFold"] is False
    assert memory["droppedObservationIds"] == []
    assert len(memory["observations"]) == 6 and len(memory["reflections"]) == 1
    assert entry.summary.startswith("# Observational memory")
    # Every adapter accepts it on the branch it was made for, and the fold is unchanged.
    validate_memory_record_on_branch(entry, b.path)
    assert fold_observational_memory_ledger([*b.path, entry]).dropped_observation_ids == ()


def test_summary_matches_the_memory_context_block() -> None:
    b = random_builder(11, 120)
    strategy = create_observational_memory_compaction_strategy(keep_recent_entries=4)
    entry = strategy.compact(b.path, session_id="s1")
    blocks = build_observational_memory_context_blocks(b.path, keep_recent_entries=4)
    memory_block = [blk for blk in blocks if blk.name == "observational-memory"]
    assert entry.summary == (memory_block[0].text if memory_block else "")


def test_full_fold_trims_lowest_priority_then_oldest_until_the_pool_fits() -> None:
    b = session(6)
    observations = b.model.observations
    per = HEURISTIC.count(observations[0].text)
    strategy = create_observational_memory_compaction_strategy(
        observations_pool_max_tokens=per * 4, estimator=HEURISTIC
    )
    plan = strategy.plan(b.path)
    assert plan.full_fold and plan.pool_tokens == per * 6
    # priorities cycle low, medium, high: the two lows go first, oldest first.
    assert plan.trimmed_observation_ids == (observations[0].id, observations[3].id)
    memory = plan.memory
    assert memory["fullFold"] is True
    assert memory["droppedObservationIds"] == [observations[0].id, observations[3].id]
    assert [o["id"] for o in memory["observations"]] == [
        o.id for i, o in enumerate(observations) if i not in (0, 3)
    ]
    # Appended, the compaction drops the trimmed ids from the fold from then on.
    entry = strategy.compact(b.path, session_id="s1")
    validate_memory_record_on_branch(entry, b.path)
    after = [*b.path, entry]
    assert (
        fold_observational_memory_ledger(after).dropped_observation_ids
        == plan.trimmed_observation_ids
    )
    active = build_observational_memory_projection(after).active_observations
    assert {o.id for o in active} == {o.id for o in observations} - set(
        plan.trimmed_observation_ids
    )
    # A second compaction now fits without trimming.
    assert strategy.plan(after).trimmed_observation_ids == ()


def test_exactly_at_the_token_cap_is_no_full_fold() -> None:
    b = session(3)
    pool = sum(HEURISTIC.count(o.text) for o in b.model.observations)
    plan = create_observational_memory_compaction_strategy(
        observations_pool_max_tokens=pool, estimator=HEURISTIC
    ).plan(b.path)
    assert not plan.full_fold and plan.trimmed_observation_ids == ()
    plan = create_observational_memory_compaction_strategy(
        observations_pool_max_tokens=pool - 1, estimator=HEURISTIC
    ).plan(b.path)
    assert plan.full_fold and len(plan.trimmed_observation_ids) == 1


def test_payload_byte_cap_trims_even_under_the_token_cap() -> None:
    b = session(40, text_size=20_000)  # ~800 KB of observation text
    strategy = create_observational_memory_compaction_strategy(
        observations_pool_max_tokens=10**9, estimator=HEURISTIC
    )
    plan = strategy.plan(b.path)
    assert plan.full_fold and plan.trimmed_observation_ids
    assert folded_payload_bytes(plan.memory) <= FOLDED_PAYLOAD_MAX_BYTES
    # Trimming stops as soon as the payload fits: one observation fewer would not have fit.
    assert folded_payload_bytes(plan.memory) + 20_000 > FOLDED_PAYLOAD_MAX_BYTES
    entry = strategy.compact(b.path, session_id="s1")
    assert (
        len(json.dumps(entry.data["memory"], ensure_ascii=False, separators=(",", ":")).encode())
        <= FOLDED_PAYLOAD_MAX_BYTES
    )  # type: ignore[index]
    assert len(entry.summary.encode()) <= 256 * 1024


def test_reflections_alone_too_big_raise_limit_exceeded() -> None:
    b = BranchBuilder()
    m = b.message("user", "hi")
    b.observe(1, sources=[m.id])
    obs_id = b.model.observations[0].id
    b.custom(
        {
            "type": "om.reflections.recorded",
            "reflections": [
                {"id": f"{i:012x}", "text": "r" * 60_000, "observationIds": [obs_id]}
                for i in range(10)
            ],
        }
    )
    strategy = create_observational_memory_compaction_strategy(estimator=HEURISTIC)
    with pytest.raises(LimitExceededError, match="512 KiB"):
        strategy.compact(b.path, session_id="s1")


def test_invalidated_memory_is_left_out_of_the_fold() -> None:
    b = BranchBuilder()
    m0, m1 = b.message("user", "a"), b.message("user", "b")
    b.observe(1, sources=[m0.id], text="revoked")
    b.observe(1, sources=[m1.id], text="kept")
    strategy = create_observational_memory_compaction_strategy(
        keep_recent_entries=0, invalidated_ids=[m0.id]
    )
    entry = strategy.compact(b.path, session_id="s1")
    assert entry.data is not None
    assert [o["text"] for o in entry.data["memory"]["observations"]] == ["kept"]
    assert entry.data["memory"]["droppedObservationIds"] == []
    assert "revoked" not in entry.summary


def test_fail_closed_inputs() -> None:
    b = session(2)
    strategy = create_observational_memory_compaction_strategy()
    with pytest.raises(InvalidInputError, match="no entries"):
        strategy.compact([], session_id="s1")
    with pytest.raises(SessionMismatchError):
        strategy.compact(b.path, session_id="other")
    with pytest.raises(InvalidInputError):
        strategy.compact(b.path, session_id="s1", trigger="")
    with pytest.raises(InvalidEntryError):
        strategy.compact(b.path, session_id="s1", timestamp="not a time")
    for kwargs in (
        {"keep_recent_entries": -1},
        {"observations_pool_max_tokens": 0},
        {"recent_message_max_tokens": -5},
    ):
        with pytest.raises(InvalidInputError):
            create_observational_memory_compaction_strategy(**kwargs)  # type: ignore[arg-type]


def test_folded_details_from_entries_and_trimmed_ids_must_be_active() -> None:
    b = session(3)
    ids = [o.id for o in b.model.observations]
    details = create_folded_memory_details(
        b.path, full_fold=True, dropped_observation_ids=[ids[1], ids[1]]
    )
    assert details["droppedObservationIds"] == [ids[1]]
    assert [o["id"] for o in details["observations"]] == [ids[0], ids[2]]
    assert details == create_folded_memory_details(
        build_observational_memory_projection(b.path),
        full_fold=True,
        dropped_observation_ids=[ids[1]],
    )
    with pytest.raises(InvalidInputError, match="not an active observation"):
        create_folded_memory_details(b.path, dropped_observation_ids=["0" * 12])
    only_first = create_folded_memory_details(b.path, invalidated_ids=[ids[1], ids[2]])
    assert [o["id"] for o in only_first["observations"]] == [ids[0]]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(branch_builders(min_steps=1, max_steps=50))
def test_any_branch_compacts_into_a_valid_entry(builder: BranchBuilder) -> None:
    path: list[SessionEntry] = builder.path
    strategy = create_observational_memory_compaction_strategy(
        keep_recent_entries=3, observations_pool_max_tokens=20, estimator=HEURISTIC
    )
    entry = strategy.compact(path, session_id="s1", entry_id="compaction-x")
    validate_memory_record_on_branch(entry, path)
    assert entry.data is not None
    memory = entry.data["memory"]
    pool = sum(HEURISTIC.count(o["text"]) for o in memory["observations"])
    assert pool <= 20
    before = fold_observational_memory_ledger(path)
    after = fold_observational_memory_ledger([*path, entry])
    assert after.dropped_observation_ids == before.dropped_observation_ids + tuple(
        memory["droppedObservationIds"]
    )
    # Deterministic: the same branch and options give the same entry.
    assert (
        strategy.compact(path, session_id="s1", entry_id="compaction-x", timestamp=entry.timestamp)
        == entry
    )
