"""Seeded generators of session trees with forks, shared by tests and benchmarks."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..entries import Role, SessionEntry, entry_from_wire

__all__ = ["AppendOp", "LeafOp", "Op", "generate_ops", "make_message"]

_WORDS = (
    "deploy staging database migration postgres friday budget invoice alice bob carol "
    "release blocker latency cache redis queue retry backoff vendor contract review "
    "schema index vacuum report meeting tuesday customer ticket rollback canary"
).split()


@dataclass(frozen=True)
class AppendOp:
    """Append these entries as one batch (or one by one when ``single``)."""

    entries: tuple[SessionEntry, ...]
    single: bool = False


@dataclass(frozen=True)
class LeafOp:
    """Move the session's leaf back to ``entry_id``."""

    session_id: str
    entry_id: str


Op = AppendOp | LeafOp

_EPOCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def make_message(
    session_id: str,
    entry_id: str,
    parent_id: str | None,
    role: Role,
    text: str,
    seconds: int,
) -> SessionEntry:
    """A message entry with a deterministic timestamp ``seconds`` after a fixed epoch."""
    stamp = (_EPOCH + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
    message: dict[str, object] = {"role": role, "content": text}
    if role == "tool":
        message["toolCallId"] = f"call-{entry_id}"
    return entry_from_wire(
        {
            "id": entry_id,
            "sessionId": session_id,
            "parentId": parent_id,
            "kind": "message",
            "timestamp": stamp,
            "message": message,
        }
    )


def generate_ops(
    seed: int,
    *,
    sessions: int = 2,
    entries_per_session: int = 60,
    forks: int = 4,
    max_batch: int = 7,
) -> list[Op]:
    """Operations that build ``sessions`` trees with about ``forks`` forks each.

    Entries of different sessions interleave, batches vary in size, and a fork moves
    the leaf back to a random earlier entry so the next append starts a new branch.
    """
    rng = random.Random(seed)
    ops: list[Op] = []
    made: dict[str, list[str]] = {f"s{seed}-{i}": [] for i in range(sessions)}
    leaf: dict[str, str | None] = dict.fromkeys(made)
    counter = 0
    fork_chance = forks / max(entries_per_session, 1)
    while any(len(ids) < entries_per_session for ids in made.values()):
        sid = rng.choice([s for s, ids in made.items() if len(ids) < entries_per_session])
        ids = made[sid]
        if ids and rng.random() < fork_chance:
            target = rng.choice(ids)
            ops.append(LeafOp(sid, target))
            leaf[sid] = target
        size = min(rng.randint(1, max_batch), entries_per_session - len(ids))
        batch: list[SessionEntry] = []
        for _ in range(size):
            counter += 1
            entry_id = f"{sid}-e{counter}"
            role: Role = rng.choice(("user", "assistant", "assistant", "tool"))
            text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 14)))
            batch.append(make_message(sid, entry_id, leaf[sid], role, text, counter * 7))
            leaf[sid] = entry_id
            ids.append(entry_id)
        ops.append(AppendOp(tuple(batch), single=size == 1 and rng.random() < 0.5))
    return ops
