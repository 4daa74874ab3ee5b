"""The pure rules of supersession: the record shape, the fold, and withholding chains."""

from __future__ import annotations

from typing import Any

import pytest

from prism_om.core.ledger import Supersession, fold_ledger
from prism_om.core.ledger_views import live_ledger, restrict_ledger
from prism_om.core.projection import active_memory
from prism_om.core.validation import validate_memory_record_on_branch
from prism_om.core.withheld import withheld_memory_ids
from prism_om.entries import SessionEntry, custom_entry, message_entry
from prism_om.errors import MemoryRecordError
from prism_om.observational_memory import recall_observational_memory

SID = "p"


def branch(*records: dict[str, Any]) -> list[SessionEntry]:
    """Two messages, one observation on each, then ``records`` (each a data payload)."""
    entries = [
        message_entry(SID, "user", "Dana owns billing.", entry_id="m1"),
        message_entry(SID, "user", "Sam owns search.", entry_id="m2", parent_id="m1"),
    ]
    entries.append(
        custom_entry(
            SID,
            {
                "type": "om.observations.recorded",
                "observations": [
                    {"id": "0a0a0a0a0a0a", "text": "Dana owns billing.", "sourceEntryIds": ["m1"]},
                    {"id": "0b0b0b0b0b0b", "text": "Sam owns search.", "sourceEntryIds": ["m2"]},
                ],
            },
            entry_id="o1",
            parent_id="m2",
        )
    )
    for n, data in enumerate(records):
        entries.append(custom_entry(SID, data, entry_id=f"r{n}", parent_id=entries[-1].id))
    return entries


def reflections(*items: tuple[str, str, list[str] | None]) -> dict[str, Any]:
    out = []
    for reflection_id, observation_id, supersedes in items:
        item: dict[str, Any] = {
            "id": reflection_id,
            "text": f"text of {reflection_id}",
            "observationIds": [observation_id],
        }
        if supersedes is not None:
            item["supersedesReflectionIds"] = supersedes
        out.append(item)
    return {"type": "om.reflections.recorded", "reflections": out}


R1, R2, C1, C2 = "111111111111", "222222222222", "c1c1c1c1c1c1", "c2c2c2c2c2c2"
ON_DANA, ON_SAM = "0a0a0a0a0a0a", "0b0b0b0b0b0b"


def chain() -> list[SessionEntry]:
    """R1 (on Dana's fact) and R2 (on Sam's), C1 supersedes both, C2 supersedes C1."""
    return branch(
        reflections((R1, ON_DANA, None), (R2, ON_SAM, None)),
        reflections((C1, ON_SAM, [R1, R2])),
        reflections((C2, ON_SAM, [C1])),
    )


def test_the_fold_follows_a_chain_and_the_live_view_keeps_its_end() -> None:
    ledger = fold_ledger(chain())
    assert ledger.supersessions == (
        Supersession(R1, C1),
        Supersession(R2, C1),
        Supersession(C1, C2),
    )
    assert [r.id for r in active_memory(ledger)[1]] == [C2]
    assert [r.id for r in live_ledger(ledger).reflections] == [C2]
    assert restrict_ledger(ledger, {R1}).supersessions == (Supersession(R1, C1),)


def test_revoking_a_source_withholds_the_whole_chain_above_it() -> None:
    ledger = fold_ledger(chain())
    _, withheld = withheld_memory_ids(ledger, {"m1"})
    # R1 rests on Dana's message; C1 supersedes R1; C2 supersedes C1. R2 does not.
    assert withheld == (R1, C1, C2)
    assert [r.id for r in active_memory(ledger, {"m1"})[1]] == [R2]
    # Revoking the end of the chain by id brings back what it superseded.
    assert [r.id for r in active_memory(ledger, {C2})[1]] == [C1]


def test_recall_on_the_entries_path_says_superseded_and_withholds_the_chain() -> None:
    entries = chain()
    first = recall_observational_memory(entries, R1).to_json()
    assert first["found"] and first["supersededBy"] == C1
    assert recall_observational_memory(entries, C2).to_json()["supersededBy"] is None
    revoked = recall_observational_memory(entries, C2, invalidated_ids={"m1"})
    assert revoked.to_json()["reason"] == "revoked"
    back = recall_observational_memory(entries, R2, invalidated_ids={"m1"}).to_json()
    assert back["found"] and back["supersededBy"] is None


def test_the_fold_ignores_what_validation_refuses() -> None:
    # Stores never hold these (validation refuses them); the pure fold stays total and
    # keeps the first supersession of a reflection, ignoring unknown or same-record ids.
    entries = branch(
        reflections((R1, ON_DANA, None)),
        reflections((C1, ON_SAM, [R1, "ffffffffffff"]), (R2, ON_SAM, [C1])),
        reflections((C2, ON_SAM, [R1])),
    )
    ledger = fold_ledger(entries)
    assert ledger.supersessions == (Supersession(R1, C1),)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (reflections((C1, ON_SAM, [C1])), "lists itself"),
        (reflections((C1, ON_SAM, [R1]), (C2, ON_SAM, [R1])), "supersedesReflectionIds"),
        (reflections((C1, ON_SAM, [R1, R1])), "twice"),
        (reflections((C1, ON_SAM, ["R1"])), "supersedesReflectionIds"),
    ],
)
def test_malformed_supersessions_name_the_field(data: dict[str, Any], needle: str) -> None:
    path = branch(reflections((R1, ON_DANA, None)))
    entry = custom_entry(SID, data, entry_id="bad", parent_id=path[-1].id)
    with pytest.raises(MemoryRecordError, match=needle) as caught:
        validate_memory_record_on_branch(entry, path)
    assert caught.value.entry_id == "bad"  # type: ignore[attr-defined]


def test_a_supersession_names_the_offending_id_and_field() -> None:
    path = chain()
    entry = custom_entry(
        SID, reflections(("dddddddddddd", ON_SAM, [C2, R2])), entry_id="bad", parent_id="r2"
    )
    with pytest.raises(MemoryRecordError) as caught:
        validate_memory_record_on_branch(entry, path)
    message = str(caught.value)
    assert repr(R2) in message and "supersedesReflectionIds[1]" in message
    assert caught.value.memory_id == R2  # type: ignore[attr-defined]
