"""Branch membership by (segment, depth) in the in-process index (issue 13, item 14).

The memory and JSONL adapters validate memory records with ``TreeIndex``; "is X on this
branch" must cost O(1) per id, not a walk of parent links per id.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from prism_om.core.validation import validate_memory_record_on_branch
from prism_om.entries import SessionEntry, custom_entry
from prism_om.errors import MemoryRecordError
from prism_om.stores.segment_index.index import TreeIndex
from prism_om.testing.generate import make_message

TS = "2024-05-01T10:00:00Z"


def naive_on_path(index: TreeIndex, entry_id: str, tip: str | None) -> bool:
    current = tip
    while current is not None:
        if current == entry_id:
            return True
        current = index.entries[current].parent_id
    return False


def random_forest(rng: random.Random, size: int) -> tuple[TreeIndex, list[SessionEntry]]:
    """An index over two sessions with many forks, appended in random batches."""
    index = TreeIndex()
    every: list[SessionEntry] = []
    by_session: dict[str, list[str]] = {"s1": [], "s2": []}
    count = 0
    while count < size:
        sid = rng.choice(["s1", "s2"])
        known = by_session[sid]
        parent = rng.choice(known) if known and rng.random() < 0.3 else index.leaf(sid)
        batch = []
        for _ in range(rng.randint(1, 4)):
            eid = f"{sid}-{count}"
            batch.append(make_message(sid, eid, parent, "user", "x", count))
            # Inside a batch, sometimes fork from an earlier entry of the same batch.
            parent = eid if rng.random() < 0.7 else rng.choice([e.id for e in batch])
            count += 1
        index.check(batch)
        index.apply(batch)
        known.extend(e.id for e in batch)
        every.extend(batch)
    return index, every


@pytest.mark.parametrize("seed", range(8))
def test_membership_matches_a_parent_walk(seed: int) -> None:
    rng = random.Random(seed)
    index, every = random_forest(rng, 300)
    ids = [e.id for e in every]
    for _ in range(40):
        tip = rng.choice(every)
        membership = index.path_membership(tip.session_id, tip.id)
        # Ask in a random order, so the lazy walk is extended out of order too.
        for entry_id in rng.sample(ids, 60):
            want = naive_on_path(index, entry_id, tip.id)
            assert membership.contains(entry_id) == want, (seed, entry_id, tip.id)
            same_session = entry_id.split("-")[0] == tip.session_id
            got = index.is_on_branch(tip.session_id, entry_id, tip.id)
            assert got == (want and same_session)
    assert not index.path_membership("s1", None).contains("missing")


def observation_record(sid: str, eid: str, parent: str, sources: list[str]) -> SessionEntry:
    data = {
        "type": "om.observations.recorded",
        "observations": [
            {"id": "aaaaaaaaaaaa", "text": "fact", "sourceEntryIds": sources, "observedAt": TS}
        ],
    }
    return custom_entry(sid, data, parent_id=parent, entry_id=eid, timestamp=TS)


@pytest.mark.parametrize("seed", range(6))
def test_batch_validation_matches_the_branch_reference(seed: int) -> None:
    """A batch that forks and then cites entries accepts exactly what the branch allows."""
    rng = random.Random(100 + seed)
    index, every = random_forest(rng, 120)
    s1 = [e for e in every if e.session_id == "s1"]
    for trial in range(30):
        # A batch: a fork off a random entry (often one with children), two more
        # entries, then a record citing random entries of the session.
        fork_from = rng.choice(s1)
        first = make_message("s1", f"t{trial}-0", fork_from.id, "user", "x", 1)
        second_parent = rng.choice([fork_from.id, first.id])
        batch = [first, make_message("s1", f"t{trial}-1", second_parent, "user", "x", 2)]
        sources = rng.sample([e.id for e in s1] + [e.id for e in batch], 3)
        record = observation_record("s1", f"t{trial}-r", batch[-1].id, sources)
        branch = index.branch("s1", fork_from.id)
        if second_parent == first.id:
            branch.append(first)
        try:
            validate_memory_record_on_branch(record, [*branch, batch[-1]])
            want_ok = True
        except MemoryRecordError:
            want_ok = False
        try:
            index.check([*batch, record])
            got_ok = True
        except MemoryRecordError:
            got_ok = False
        assert got_ok == want_ok, (seed, trial, sources)


class CountingDict(dict[str, int]):
    """A depth table that counts lookups and fails once the budget is spent."""

    def __init__(self, data: dict[str, int], budget: int) -> None:
        super().__init__(data)
        self.lookups = 0
        self.budget = budget

    def __getitem__(self, key: str) -> int:
        self.lookups += 1
        if self.lookups > self.budget:
            raise AssertionError(f"more than {self.budget} depth lookups: not O(ids)")
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        # dict.get bypasses __getitem__; route it through the count too.
        return self[key] if key in self else default  # noqa: SIM401


class IndexDriver:
    """Appends and checkouts straight on a ``TreeIndex``, as the memory and JSONL stores
    drive theirs (check, then apply), so the work of their validation can be counted
    without reaching into a store."""

    def __init__(self) -> None:
        self.index = TreeIndex()

    async def append_many(self, batch: list[SessionEntry]) -> None:
        self.index.check(batch)
        self.index.apply(batch)

    async def append(self, entry: SessionEntry) -> None:
        await self.append_many([entry])

    async def checkout(self, session_id: str, entry_id: str) -> None:
        self.index.trees[session_id].leaf = self.index.resolve_leaf(session_id, entry_id)

    async def close(self) -> None:
        return None


async def test_validation_work_grows_with_ids_not_depth() -> None:
    """~10k sources across a 20k-deep branch, then a reflection over 500 early
    observations: the depth table is read O(ids) times. The old parent walk needed
    ~10^8 steps here (minutes); the budget stops it early instead."""
    depth = 20_000
    store = IndexDriver()
    try:
        chain = [
            make_message("s1", f"m{i}", f"m{i - 1}" if i else None, "user", "x", i)
            for i in range(depth)
        ]
        # Observations of the first 500 messages, recorded early on the branch.
        early = [
            {
                "id": f"{n:012x}",
                "text": "early",
                "sourceEntryIds": [f"m{n}"],
                "observedAt": TS,
            }
            for n in range(500)
        ]
        chain.insert(
            501,
            custom_entry(
                "s1",
                {"type": "om.observations.recorded", "observations": early},
                parent_id="m500",
                entry_id="early",
                timestamp=TS,
            ),
        )
        chain[502] = make_message("s1", "m501", "early", "user", "x", 501)
        await store.append_many(chain)
        # A fork near the top, so the path has more than one piece.
        await store.append(make_message("s1", "side", f"m{depth - 10}", "user", "x", 1))
        await store.checkout("s1", f"m{depth - 1}")

        index = store.index
        sources = [f"m{i}" for i in range(0, depth, 2)]  # 10,000 ids spread over the branch
        counting = CountingDict(index.depth, budget=4 * (len(sources) + 500) + 1_000)
        index.depth = counting
        groups = [sources[i : i + 4000] for i in range(0, len(sources), 4000)]
        data = {
            "type": "om.observations.recorded",
            "observations": [
                {
                    "id": f"{0xB0000 + n:012x}",
                    "text": "wide",
                    "sourceEntryIds": group,
                    "observedAt": TS,
                }
                for n, group in enumerate(groups)
            ],
        }
        leaf = f"m{depth - 1}"
        await store.append(custom_entry("s1", data, parent_id=leaf, entry_id="wide", timestamp=TS))
        reflection = {
            "type": "om.reflections.recorded",
            "reflections": [
                {
                    "id": "cccccccccccc",
                    "text": "summary",
                    "observationIds": [f"{n:012x}" for n in range(500)],
                }
            ],
        }
        await store.append(
            custom_entry("s1", reflection, parent_id="wide", entry_id="refl", timestamp=TS)
        )
        assert counting.lookups > len(sources)  # the lookups did go through the table
        # And a source off the branch is still refused.
        bad = observation_record("s1", "bad", "refl", ["m3", "side"])
        with pytest.raises(MemoryRecordError, match="'side'"):
            await store.append(bad)
    finally:
        await store.close()
