"""Supersession of reflections, the same on every adapter (docs/design.md).

A reflection carrying ``supersedesReflectionIds`` takes the reflections it names out of the
active view (ledger views, context blocks) while they stay in the ledger and recallable by
id; every adapter refuses the same invalid supersessions with ``MemoryRecordError`` naming
the id and the field, writing nothing; and a revocation withholds a consolidation that
rests, through what it supersedes, on a revoked source.

Mixed into ``MemoryConformance``, which provides the ``store`` fixture.
"""

from __future__ import annotations

from typing import Any

from ..core.ledger import Supersession, fold_ledger
from ..core.ledger_views import live_ledger
from ..core.limits import MAX_SUPERSEDED_PER_REFLECTION
from ..core.projection import active_memory
from ..core.records import REFLECTIONS_RECORDED
from ..core.withheld import withheld_memory_ids
from ..entries import SessionEntry, custom_entry
from ..errors import MemoryRecordError, MemoryRecordTooLargeError
from ..observational_memory import (
    build_observational_memory_context_blocks,
    recall_observational_memory,
)
from ..stores.base import SessionStore
from ._requires import pytest
from .conformance import snapshot
from .om_factories import BranchBuilder

__all__ = ["SupersessionConformance"]


def _reflection(
    reflection_id: str, observation_id: str, supersedes: list[str] | None = None
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": reflection_id,
        "text": f"reflection {reflection_id}",
        "observationIds": [observation_id],
    }
    if supersedes is not None:
        item["supersedesReflectionIds"] = supersedes
    return item


async def _memory_block(store: SessionStore, sid: str, invalid: frozenset[str]) -> str:
    blocks = await build_observational_memory_context_blocks(
        store, session_id=sid, keep_recent_entries=0, invalidated_ids=invalid
    )
    return next((b.text for b in blocks if b.name == "observational-memory"), "")


class SupersessionConformance:
    """Supersession: views, recall, validation and revocation, against the pure fold."""

    async def _two_reflections_and_a_consolidation(
        self, store: SessionStore, sid: str
    ) -> tuple[BranchBuilder, list[str], str]:
        b = BranchBuilder(session_id=sid)
        b.message("user")
        b.message("assistant")
        b.observe(2)
        b.message("user")
        b.observe(1)
        first = b.reflect(2)
        second = b.reflect(1)
        assert first is not None and second is not None
        old = [r.id for r in b.model.reflections]
        consolidation = b.supersede(old)
        assert consolidation is not None and consolidation.data is not None
        new_id = consolidation.data["reflections"][0]["id"]
        await store.append_many(b.entries)
        return b, old, new_id

    async def test_superseded_reflections_leave_the_active_view(self, store: SessionStore) -> None:
        b, old, new_id = await self._two_reflections_and_a_consolidation(store, "sup1")
        ledger = await store.ledger("sup1")
        assert ledger == fold_ledger(b.path)
        assert ledger.supersessions == tuple(Supersession(o, new_id) for o in old)
        assert [r.id for r in ledger.reflections] == [*old, new_id], "all stay in the ledger"
        live = await store.live_ledger("sup1")
        assert live == live_ledger(ledger)
        assert [r.id for r in live.reflections] == [new_id]
        assert [r.id for r in active_memory(ledger)[1]] == [new_id]
        text = await _memory_block(store, "sup1", frozenset())
        assert new_id in text and not any(o in text for o in old)
        subset = await store.memory_subset("sup1", [old[0]])
        assert subset.supersessions == (Supersession(old[0], new_id),)

    async def test_a_superseded_reflection_is_recalled_by_id(self, store: SessionStore) -> None:
        _, old, new_id = await self._two_reflections_and_a_consolidation(store, "sup2")
        recalled = await recall_observational_memory(store, old[0], session_id="sup2")
        assert recalled.found and recalled.kind == "reflection"
        assert recalled.to_json()["supersededBy"] == new_id
        assert recalled.to_json()["sources"], "the evidence stays reachable"
        consolidated = await recall_observational_memory(store, new_id, session_id="sup2")
        assert consolidated.found and consolidated.to_json()["supersededBy"] is None
        assert consolidated.to_json()["reflection"]["supersedesReflectionIds"] == old

    async def test_revocation_cascades_through_supersession(self, store: SessionStore) -> None:
        b, old, new_id = await self._two_reflections_and_a_consolidation(store, "sup3")
        ledger = fold_ledger(b.path)
        first = ledger.reflections_by_id[old[0]].reflection
        second = ledger.reflections_by_id[old[1]].reflection
        # Revoke a source under the first reflection only (not one the second rests on).
        spared = {
            s
            for o in second.observation_ids
            for s in ledger.observations_by_id[o].observation.source_entry_ids
        }
        sources = [
            s
            for o in first.observation_ids
            for s in ledger.observations_by_id[o].observation.source_entry_ids
            if s not in spared
        ]
        if not sources:
            pytest.skip("the generated reflections share every source")
        invalid = frozenset(sources[:1])
        _, withheld_refl = withheld_memory_ids(await store.ledger("sup3"), invalid)
        assert old[0] in withheld_refl and new_id in withheld_refl
        assert old[1] not in withheld_refl
        text = await _memory_block(store, "sup3", invalid)
        # The consolidation rests on the revoked reflection: withheld. The other
        # reflection it merged is not revoked, so it is active again.
        assert new_id not in text and old[0] not in text and old[1] in text
        revoked = await recall_observational_memory(
            store, new_id, session_id="sup3", invalidated_ids=invalid
        )
        assert revoked.to_json() == {
            "id": new_id,
            "kind": "reflection",
            "found": False,
            "reason": "revoked",
        }
        back = await recall_observational_memory(
            store, old[1], session_id="sup3", invalidated_ids=invalid
        )
        assert back.found and back.to_json()["supersededBy"] is None
        entries = await store.entries("sup3")
        pure = build_observational_memory_context_blocks(
            entries, keep_recent_entries=0, invalidated_ids=invalid
        )
        from_store = await build_observational_memory_context_blocks(
            store, session_id="sup3", keep_recent_entries=0, invalidated_ids=invalid
        )
        assert from_store == pure

    async def test_another_branch_does_not_see_a_supersession(self, store: SessionStore) -> None:
        b, old, new_id = await self._two_reflections_and_a_consolidation(store, "sup4")
        fork_at = b.path[-2].id  # before the consolidation
        await store.checkout("sup4", fork_at)
        ledger = await store.ledger("sup4")
        assert ledger.supersessions == ()
        assert [r.id for r in (await store.live_ledger("sup4")).reflections] == old
        # On this branch the old reflections are still open to a consolidation of its own.
        again = custom_entry(
            "sup4",
            {
                "type": REFLECTIONS_RECORDED,
                "reflections": [_reflection("abcabcabcabc", first_observation(ledger), old)],
            },
            parent_id=fork_at,
        )
        await store.append(again)
        assert [r.id for r in (await store.live_ledger("sup4")).reflections] == ["abcabcabcabc"]
        assert await store.ledger("sup4") == fold_ledger(await store.entries("sup4"))
        assert new_id not in (await store.ledger("sup4")).reflections_by_id

    async def _supersession_refused(
        self,
        store: SessionStore,
        entry: SessionEntry,
        *needles: str,
        error: type[Exception] = MemoryRecordError,
    ) -> None:
        before = await snapshot(store)
        with pytest.raises(error) as caught:
            await store.append(entry)
        for needle in needles:
            assert needle in str(caught.value)
        assert await snapshot(store) == before

    async def test_invalid_supersessions_are_refused(self, store: SessionStore) -> None:
        _, old, new_id = await self._two_reflections_and_a_consolidation(store, "sup5")
        sid, leaf = "sup5", await store.leaf("sup5")
        ledger = await store.ledger(sid)
        obs = first_observation(ledger)

        def record(*reflections: dict[str, Any]) -> SessionEntry:
            return custom_entry(
                sid,
                {"type": REFLECTIONS_RECORDED, "reflections": list(reflections)},
                parent_id=leaf,
            )

        field = "data.reflections[0].supersedesReflectionIds[0]"
        # Unknown, an observation id, already superseded (once only).
        await self._supersession_refused(
            store, record(_reflection("a1a1a1a1a1a1", obs, ["ffffffffffff"])), field
        )
        await self._supersession_refused(
            store, record(_reflection("a1a1a1a1a1a1", obs, [obs])), obs, field
        )
        await self._supersession_refused(
            store,
            record(_reflection("a1a1a1a1a1a1", obs, [old[0]])),
            old[0],
            "already superseded",
        )
        # A reflection of the same record is not earlier on the branch.
        await self._supersession_refused(
            store,
            record(
                _reflection("a1a1a1a1a1a1", obs),
                _reflection("a2a2a2a2a2a2", obs, ["a1a1a1a1a1a1"]),
            ),
            "data.reflections[1].supersedesReflectionIds[0]",
        )
        # Two superseders of one reflection in one record, and a reflection naming itself.
        await self._supersession_refused(
            store,
            record(
                _reflection("a1a1a1a1a1a1", obs, [new_id]),
                _reflection("a2a2a2a2a2a2", obs, [new_id]),
            ),
            new_id,
        )
        await self._supersession_refused(
            store, record(_reflection("a1a1a1a1a1a1", obs, ["a1a1a1a1a1a1"]))
        )
        await self._supersession_refused(
            store, record(_reflection("a1a1a1a1a1a1", obs, ["NOT-HEX"])), "NOT-HEX"
        )
        too_many = [f"{n:012x}" for n in range(MAX_SUPERSEDED_PER_REFLECTION + 1)]
        await self._supersession_refused(
            store,
            record(_reflection("a1a1a1a1a1a1", obs, too_many)),
            "supersedesReflectionIds",
            "MAX_SUPERSEDED_PER_REFLECTION",
            error=MemoryRecordTooLargeError,
        )
        # The successor itself can be superseded: chains are how consolidation goes on.
        await store.append(record(_reflection("a1a1a1a1a1a1", obs, [new_id])))
        ledger = await store.ledger(sid)
        assert ledger.superseded_by[new_id] == "a1a1a1a1a1a1"
        assert ledger == fold_ledger(await store.entries(sid))


def first_observation(ledger: Any) -> str:
    return str(ledger.observations[0].id)
