"""The benchmark transcript: one session, one long branch, one observation per 50 messages.

Every system gets the same messages. Our stores also get the ``om.observations.recorded``
records (one observation citing a message of the last 50, covering up to the newest),
om-memory gets the same observations as its own rows, and the floor gets the same rows
our SQLite adapter writes (wire JSON plus a token count with the same estimator).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from prism_om.core.records import OBSERVATIONS_DROPPED, OBSERVATIONS_RECORDED
from prism_om.entries import Role, SessionEntry, custom_entry
from prism_om.observational_memory.settings import DEFAULT_OBSERVATIONS_POOL_TARGET_TOKENS
from prism_om.testing.generate import make_message
from prism_om.tokens import get_estimator

__all__ = [
    "MESSAGES_PER_OBSERVATION",
    "SESSION_ID",
    "Dataset",
    "build_dataset",
    "capped_entries",
    "continuation",
]

SESSION_ID: Final = "bench"
MESSAGES_PER_OBSERVATION: Final = 50
_ROLES: Final[tuple[Role, ...]] = ("user", "assistant", "tool", "assistant")
_WORDS: Final = (
    "deploy staging database migration postgres friday budget invoice alice bob carol "
    "release blocker latency cache redis queue retry backoff vendor contract review "
    "schema index vacuum report meeting tuesday customer ticket rollback canary"
).split()


@dataclass(frozen=True)
class Dataset:
    """``size`` entries of one branch, root first, with handy ids into it."""

    size: int
    entries: list[SessionEntry]
    memory_ids: list[str]
    """Observation ids, in the order they were recorded."""
    observed: list[tuple[int, str, str, str]]
    """(index of the record entry, memory id, text, source entry id) per observation."""

    @property
    def messages(self) -> list[SessionEntry]:
        return [e for e in self.entries if e.kind == "message"]

    @property
    def last_id(self) -> str:
        return self.entries[-1].id

    def middle_message_id(self) -> str:
        """A message near the middle of the branch: the cursor of the page workload."""
        middle = len(self.entries) // 2
        for entry in self.entries[middle:]:
            if entry.kind == "message":
                return entry.id
        raise ValueError("the dataset has no message after its middle")

    def middle_memory_id(self) -> tuple[str, str]:
        """(memory id, source entry id) of an observation near the middle."""
        _, memory_id, _, source = self.observed[len(self.observed) // 2]
        return memory_id, source


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 30)))


def _entries(
    rng: random.Random, start: int, count: int, parent: str | None, prefix: str
) -> Iterator[tuple[SessionEntry, str | None]]:
    """``count`` entries after ``parent``; yields each entry with the memory id it records."""
    window: list[SessionEntry] = []
    for n in range(start, start + count):
        if len(window) == MESSAGES_PER_OBSERVATION:
            memory_id = f"{n:012x}"
            source = rng.choice(window)
            data = {
                "type": OBSERVATIONS_RECORDED,
                "observations": [
                    {
                        "id": memory_id,
                        "text": "observed " + _text(rng),
                        "sourceEntryIds": [source.id],
                        "observedAt": source.timestamp,
                        "priority": rng.choice(("low", "medium", "high")),
                    }
                ],
                "coversUpToId": window[-1].id,
            }
            entry = custom_entry(
                SESSION_ID,
                data,
                parent_id=parent,
                entry_id=f"{prefix}{n:08d}",
                timestamp=window[-1].timestamp,
            )
            window = []
            yield entry, memory_id
        else:
            role = _ROLES[n % len(_ROLES)]
            entry = make_message(SESSION_ID, f"{prefix}{n:08d}", parent, role, _text(rng), n * 5)
            window.append(entry)
            yield entry, None
        parent = entry.id


def build_dataset(size: int, seed: int = 7) -> Dataset:
    """The ``size``-entry branch every adapter and peer is loaded with."""
    rng = random.Random(seed)
    entries: list[SessionEntry] = []
    memory_ids: list[str] = []
    observed: list[tuple[int, str, str, str]] = []
    for entry, memory_id in _entries(rng, 0, size, None, "e"):
        if memory_id is not None and entry.data is not None:
            obs = entry.data["observations"][0]
            memory_ids.append(memory_id)
            observed.append((len(entries), memory_id, obs["text"], obs["sourceEntryIds"][0]))
        entries.append(entry)
    return Dataset(size, entries, memory_ids, observed)


def continuation(dataset: Dataset, count: int, prefix: str, seed: int = 11) -> list[SessionEntry]:
    """``count`` more messages continuing the dataset's branch (ids start with ``prefix``).

    Only messages: the append samples measure the transcript path, and a fresh window
    means no observation record lands in them.
    """
    rng = random.Random(seed)
    out: list[SessionEntry] = []
    parent = dataset.last_id
    base = dataset.size + 1
    for n in range(base, base + count):
        role = _ROLES[n % len(_ROLES)]
        entry = make_message(SESSION_ID, f"{prefix}{n:08d}", parent, role, _text(rng), n * 5)
        out.append(entry)
        parent = entry.id
    return out


CAPPED_OBSERVATIONS_PER_RECORD: Final = 3
"""Observations per observer pass in the capped session: with the dataset's one pass per 50
messages this compresses the transcript ~19x, inside the 5-40x published for observational
memory (landscape.md). The dataset alone (one per pass) compresses ~57x, sparser than any
published figure, and its 10k session never reaches the dropper's target: it would measure a
session the dropper has not started capping."""


def _denser(entry: SessionEntry, rng: random.Random, per_record: int) -> SessionEntry:
    """The record with ``per_record - 1`` more observations of the same window."""
    assert entry.data is not None
    first = entry.data["observations"][0]
    base = int(first["id"], 16)
    extra = [
        {
            **first,
            # Ids stay 12 hex digits and unique: the dataset's ids count entries (< 2**40).
            "id": f"{base | (k << 44):012x}",
            "text": "observed " + _text(rng),
            "priority": rng.choice(("low", "medium", "high")),
        }
        for k in range(1, per_record)
    ]
    data = {**entry.data, "observations": [first, *extra]}
    return entry.model_copy(update={"data": data})


def capped_entries(
    dataset: Dataset,
    target_tokens: int = DEFAULT_OBSERVATIONS_POOL_TARGET_TOKENS,
    per_record: int = CAPPED_OBSERVATIONS_PER_RECORD,
) -> list[SessionEntry]:
    """The dataset's branch with a dropper at work: the live pool stays near a cap.

    After each observation record, once the live observations' text exceeds
    ``target_tokens`` (the dropper's default target), an ``om.observations.dropped``
    record retires the oldest until the pool is back at three quarters of it, as a
    dropper run would (it keeps the pool under its target, least relevant first; here
    oldest first). Each pass records ``per_record`` observations (see
    ``CAPPED_OBSERVATIONS_PER_RECORD``), so the pool reaches the target early and stays near
    it whatever the transcript's length.
    """
    est = get_estimator()
    rng = random.Random(13)
    live: list[tuple[str, int]] = []
    pool = 0
    out: list[SessionEntry] = []
    rechain: str | None = None
    for entry in dataset.entries:
        if rechain is not None:
            entry = entry.model_copy(update={"parent_id": rechain})
            rechain = None
        if entry.custom_type == OBSERVATIONS_RECORDED and per_record > 1:
            entry = _denser(entry, rng, per_record)
        out.append(entry)
        if entry.custom_type != OBSERVATIONS_RECORDED or entry.data is None:
            continue
        for obs in entry.data["observations"]:
            tokens = est.count(obs["text"])
            live.append((obs["id"], tokens))
            pool += tokens
        if pool <= target_tokens:
            continue
        gone: list[str] = []
        while live and pool > target_tokens * 3 // 4:
            memory_id, tokens = live.pop(0)
            gone.append(memory_id)
            pool -= tokens
        drop = custom_entry(
            SESSION_ID,
            {"type": OBSERVATIONS_DROPPED, "observationIds": gone, "coversUpToId": entry.id},
            parent_id=entry.id,
            entry_id=f"d{entry.id}",
            timestamp=entry.timestamp,
        )
        out.append(drop)
        rechain = drop.id
    return out
