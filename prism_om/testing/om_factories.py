"""Generators of realistic session branches with observational memory, for tests.

A plain importable module (no fixtures): ``BranchBuilder`` appends messages, observation,
reflection and drop records, revocation tombstones, ``om.folded`` compactions, scope
records, foreign custom entries and forks, keeping every memory record valid for the
branch it lands on (each passes ``validate_memory_record_on_branch``). It also keeps an
independent model of what the fold must produce (``builder.model``), built from its own
bookkeeping rather than from the code under test.

Two ways in:

* ``random_builder(seed, steps=60)`` / ``random_branch(seed, steps)``: seeded, reproducible;
* hypothesis: ``branch_builders()`` / ``branches()`` draw an operation list plus a
  ``Random``, so failures shrink to short operation lists.

Entry ids are ``"<session_id>.<n>"`` (unique across sessions of one store); timestamps
advance by 1-180 minutes per entry from 2024-05-01T09:00Z, so branches span several days.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from prism_om.core.records import (
    FOLDED_TYPE,
    OBSERVATIONS_DROPPED,
    OBSERVATIONS_RECORDED,
    REFLECTIONS_RECORDED,
    Observation,
    Reflection,
)
from prism_om.core.scope_map import SCOPE_OPENED
from prism_om.entries import SessionEntry, compaction_entry, custom_entry, message_entry
from prism_om.testing._requires import st

__all__ = [
    "BASE_TIME",
    "OPERATIONS",
    "SUPERSESSION_OPERATIONS",
    "BranchBuilder",
    "ModelState",
    "branch_builders",
    "branches",
    "random_branch",
    "random_builder",
]

BASE_TIME = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
OPERATIONS: tuple[str, ...] = (
    "user",
    "assistant",
    "tool",
    "user",
    "assistant",
    "observe",
    "observe",
    "reflect",
    "drop",
    "tombstone",
    "compact",
    "scope",
    "custom",
    "fork",
)
SUPERSESSION_OPERATIONS: tuple[str, ...] = (*OPERATIONS, "reflect", "supersede", "supersede")
"""``OPERATIONS`` plus consolidating reflector runs (``supersedesReflectionIds``).

A separate list, so that seeded builders of ``OPERATIONS`` stay what they always were."""
_WORDS = (
    "billing postgres migration deadline friday pgbouncer retry queue invoice tenant "
    "schema index latency cache budget review deploy rollback alert oncall ticket"
).split()
_PRIORITIES = ("low", "medium", "high")


@dataclass(frozen=True)
class ModelState:
    """What the ledger of the current branch must hold, kept by the builder itself."""

    observations: tuple[Observation, ...] = ()
    reflections: tuple[Reflection, ...] = ()
    dropped: tuple[str, ...] = ()
    observation_cover: str | None = None
    reflection_cover: str | None = None
    drop_cover: str | None = None
    messages: tuple[str, ...] = ()
    """Eligible message entry ids on the branch, in order."""
    superseded: tuple[str, ...] = ()
    """Superseded reflection ids, in the order they were superseded."""

    @property
    def active_reflections(self) -> tuple[Reflection, ...]:
        gone = set(self.superseded)
        return tuple(r for r in self.reflections if r.id not in gone)

    @property
    def active_observations(self) -> tuple[Observation, ...]:
        gone = set(self.dropped)
        return tuple(o for o in self.observations if o.id not in gone)


@dataclass
class BranchBuilder:
    """Builds one session tree; ``path`` is the current branch, root first."""

    session_id: str = "s1"
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    secrets: Sequence[str] = ()
    """Values the builder sprinkles into message, observation and reflection text."""
    entries: list[SessionEntry] = field(default_factory=list)
    """Every entry, in append order (forks included)."""
    path: list[SessionEntry] = field(default_factory=list)
    _states: dict[str, ModelState] = field(default_factory=dict)
    _clock: datetime = BASE_TIME
    _memory_ids: set[str] = field(default_factory=set)
    _tool_calls: int = 0

    # -- plumbing ------------------------------------------------------------------------

    @property
    def model(self) -> ModelState:
        return self._states[self.path[-1].id] if self.path else ModelState()

    def _next(self) -> tuple[str, str, str | None]:
        self._clock += timedelta(minutes=self.rng.randint(1, 180), seconds=self.rng.randint(0, 59))
        stamp = self._clock.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        entry_id = f"{self.session_id}.{len(self.entries) + 1:05d}"
        return entry_id, stamp, (self.path[-1].id if self.path else None)

    def _push(self, entry: SessionEntry, state: ModelState) -> SessionEntry:
        self.entries.append(entry)
        self.path.append(entry)
        self._states[entry.id] = state
        return entry

    def memory_id(self) -> str:
        while True:
            value = f"{self.rng.getrandbits(48):012x}"
            if value not in self._memory_ids:
                self._memory_ids.add(value)
                return value

    def _text(self, n: int = 6) -> str:
        words = [self.rng.choice(_WORDS) for _ in range(n)]
        if self.secrets and self.rng.random() < 0.3:
            words.insert(self.rng.randrange(len(words) + 1), self.rng.choice(self.secrets))
        return " ".join(words)

    def _cover(self, covers: bool | str | None) -> dict[str, Any]:
        if covers is True and self.path:
            return {"coversUpToId": self.path[-1].id}
        if isinstance(covers, str):
            return {"coversUpToId": covers}
        return {}

    # -- operations ----------------------------------------------------------------------

    def message(self, role: str = "user", text: str | None = None) -> SessionEntry:
        entry_id, stamp, parent = self._next()
        body = text if text is not None else self._text()
        kwargs: dict[str, Any] = {}
        if role == "tool":
            self._tool_calls += 1
            kwargs["tool_call_id"] = f"call_{self._tool_calls}"
        elif role == "assistant" and self.rng.random() < 0.2:
            kwargs["tool_calls"] = [
                {"id": f"call_{self._tool_calls + 1}", "name": "search", "arguments": {"q": body}}
            ]
        if role in ("user", "assistant") and len(self.model.messages) % 5 == 3:
            # Some messages carry a host's data (schema version 7), as PrismSession's
            # items do; chosen without the rng, so the seeded branches stay as they were.
            kwargs["data"] = {"type": "host.item", "n": len(self.model.messages), "text": ""}
        entry = message_entry(
            self.session_id,
            role,  # type: ignore[arg-type]
            body,
            parent_id=parent,
            entry_id=entry_id,
            timestamp=stamp,
            **kwargs,
        )
        return self._push(entry, replace(self.model, messages=(*self.model.messages, entry.id)))

    def observe(
        self,
        count: int | None = None,
        *,
        covers: bool | str | None = True,
        sources: Sequence[str] | None = None,
        priority: str | None = None,
        text: str | None = None,
    ) -> SessionEntry:
        """An observer run: ``count`` observations (0 allowed) over eligible messages."""
        state = self.model
        pool = list(state.messages)
        if count is None:
            count = self.rng.randint(0, 3) if pool else 0
        stamps = {e.id: e.timestamp for e in self.path}
        observations = []
        for _ in range(count):
            chosen = (
                list(sources)
                if sources is not None
                else self.rng.sample(pool[-12:], k=min(len(pool[-12:]), self.rng.randint(1, 3)))
            )
            wire: dict[str, Any] = {
                "id": self.memory_id(),
                "text": text if text is not None else self._text(),
                "sourceEntryIds": chosen,
                "observedAt": max(stamps[s] for s in chosen),
                "priority": priority or self.rng.choice(_PRIORITIES),
            }
            if self.rng.random() < 0.25:
                wire["referencedDate"] = (self._clock + timedelta(days=3)).date().isoformat()
            observations.append(wire)
        data = {"type": OBSERVATIONS_RECORDED, "observations": observations, **self._cover(covers)}
        entry_id, stamp, parent = self._next()
        entry = custom_entry(
            self.session_id, data, parent_id=parent, entry_id=entry_id, timestamp=stamp
        )
        new = tuple(Observation.model_validate(o) for o in observations)
        return self._push(
            entry,
            replace(
                state,
                observations=state.observations + new,
                observation_cover=data.get("coversUpToId", state.observation_cover),
            ),
        )

    def reflect(
        self, count: int | None = None, *, covers: bool | str | None = True
    ) -> SessionEntry | None:
        """A reflector run over recorded observations (None when there are none)."""
        state = self.model
        recorded = [o.id for o in state.observations]
        if not recorded:
            return None
        if count is None:
            count = self.rng.randint(0, 2)
        reflections = [
            {
                "id": self.memory_id(),
                "text": self._text(8),
                "observationIds": self.rng.sample(
                    recorded, k=min(len(recorded), self.rng.randint(1, 3))
                ),
                "priority": self.rng.choice(_PRIORITIES),
            }
            for _ in range(count)
        ]
        data = {"type": REFLECTIONS_RECORDED, "reflections": reflections, **self._cover(covers)}
        entry_id, stamp, parent = self._next()
        entry = custom_entry(
            self.session_id, data, parent_id=parent, entry_id=entry_id, timestamp=stamp
        )
        new = tuple(Reflection.model_validate(r) for r in reflections)
        return self._push(
            entry,
            replace(
                state,
                reflections=state.reflections + new,
                reflection_cover=data.get("coversUpToId", state.reflection_cover),
            ),
        )

    def supersede(
        self, ids: Sequence[str] | None = None, *, covers: bool | str | None = True
    ) -> SessionEntry | None:
        """A consolidating reflector run: one or two reflections, each superseding some of
        the reflections not superseded yet (``ids``: all of them go to the first one)."""
        state = self.model
        recorded = [o.id for o in state.observations]
        open_ids = [r.id for r in state.active_reflections]
        if ids is None:
            if not open_ids or not recorded:
                return None
            self.rng.shuffle(open_ids)
            cut = self.rng.randint(1, min(3, len(open_ids)))
            groups = [open_ids[:cut]]
            if len(open_ids) > cut and self.rng.random() < 0.4:
                groups.append(open_ids[cut : cut + self.rng.randint(1, 2)])
        else:
            groups = [list(ids)]
        reflections = [
            {
                "id": self.memory_id(),
                "text": self._text(5),
                "observationIds": self.rng.sample(
                    recorded, k=min(len(recorded), self.rng.randint(1, 2))
                ),
                "priority": self.rng.choice(_PRIORITIES),
                "supersedesReflectionIds": group,
            }
            for group in groups
        ]
        data = {"type": REFLECTIONS_RECORDED, "reflections": reflections, **self._cover(covers)}
        entry_id, stamp, parent = self._next()
        entry = custom_entry(
            self.session_id, data, parent_id=parent, entry_id=entry_id, timestamp=stamp
        )
        new = tuple(Reflection.model_validate(r) for r in reflections)
        gone = tuple(old for group in groups for old in group)
        return self._push(
            entry,
            replace(
                state,
                reflections=state.reflections + new,
                superseded=state.superseded + gone,
                reflection_cover=data.get("coversUpToId", state.reflection_cover),
            ),
        )

    def drop(
        self, ids: Iterable[str] | None = None, *, covers: bool | str | None = True
    ) -> SessionEntry | None:
        """A dropper run (``covers=True``) or a revocation tombstone (``covers=False``)."""
        state = self.model
        if ids is None:
            active = [o.id for o in state.active_observations]
            if not active:
                return None
            ids = self.rng.sample(active, k=min(len(active), self.rng.randint(1, 2)))
            # Now and then re-drop an already dropped id: allowed, and not a duplicate drop.
            if state.dropped and self.rng.random() < 0.2:
                ids.append(self.rng.choice(state.dropped))
                ids = list(dict.fromkeys(ids))
        ids = list(ids)
        data = {"type": OBSERVATIONS_DROPPED, "observationIds": ids, **self._cover(covers)}
        entry_id, stamp, parent = self._next()
        entry = custom_entry(
            self.session_id, data, parent_id=parent, entry_id=entry_id, timestamp=stamp
        )
        dropped = state.dropped + tuple(i for i in ids if i not in state.dropped)
        return self._push(
            entry,
            replace(state, dropped=dropped, drop_cover=data.get("coversUpToId", state.drop_cover)),
        )

    def compact(self, trim: Iterable[str] | None = None, keep: int = 4) -> SessionEntry:
        """An ``om.folded`` compaction built by hand, trimming ``trim`` (or a random few)."""
        state = self.model
        active = list(state.active_observations)
        if trim is None:
            trim = [o.id for o in active if self.rng.random() < 0.2]
        trimmed = list(dict.fromkeys(trim))
        memory = {
            "type": FOLDED_TYPE,
            "version": 1,
            "fullFold": bool(trimmed),
            "observations": [
                o.model_dump(by_alias=True, mode="json") for o in active if o.id not in trimmed
            ],
            "reflections": [r.model_dump(by_alias=True, mode="json") for r in state.reflections],
            "droppedObservationIds": trimmed,
        }
        through = self.path[-1].id if self.path else None
        data = {
            "throughEntryId": through,
            "keepEntryIds": list(state.messages[-keep:]) if keep else [],
            "strategy": "observational-memory",
            "trigger": "manual",
            "memory": memory,
        }
        entry_id, stamp, parent = self._next()
        entry = compaction_entry(
            self.session_id,
            "memory summary",
            data,
            parent_id=parent,
            entry_id=entry_id,
            timestamp=stamp,
        )
        dropped = state.dropped + tuple(i for i in trimmed if i not in state.dropped)
        return self._push(entry, replace(state, dropped=dropped))

    def custom(self, data: dict[str, Any]) -> SessionEntry:
        entry_id, stamp, parent = self._next()
        entry = custom_entry(
            self.session_id, data, parent_id=parent, entry_id=entry_id, timestamp=stamp
        )
        return self._push(entry, self.model)

    def scope(self) -> SessionEntry:
        """A work-scope record: ignored by the fold, accepted untouched by validation."""
        return self.custom({"type": SCOPE_OPENED, "id": f"task:{self.rng.randint(1, 99)}"})

    def checkout(self, entry_id: str) -> None:
        """Move the leaf back to ``entry_id``; the next append forks the tree."""
        ids = [e.id for e in self.path]
        self.path = self.path[: ids.index(entry_id) + 1]

    def fork(self) -> None:
        if len(self.path) > 2:
            self.checkout(self.rng.choice(self.path[1:-1]).id)

    def run(self, operations: Iterable[str]) -> BranchBuilder:
        """Apply named operations (see ``OPERATIONS``); the first entry is always a user message."""
        if not self.path:
            self.message("user")
        for op in operations:
            if op in ("user", "assistant", "tool"):
                self.message(op)
            elif op == "observe":
                self.observe(covers=self.rng.random() < 0.85)
            elif op == "reflect":
                self.reflect(covers=self.rng.random() < 0.85)
            elif op == "supersede":
                self.supersede(covers=self.rng.random() < 0.85)
            elif op == "drop":
                self.drop(covers=True)
            elif op == "tombstone":
                self.drop(covers=False)
            elif op == "compact":
                self.compact()
            elif op == "scope":
                self.scope()
            elif op == "custom":
                self.custom({"type": "app.note", "text": self._text(3)})
            elif op == "fork":
                self.fork()
            else:
                raise ValueError(f"unknown operation {op!r}")
        return self


def random_builder(
    seed: int,
    steps: int = 60,
    *,
    session_id: str = "s1",
    secrets: Sequence[str] = (),
    forks: bool = True,
    operations: Sequence[str] = OPERATIONS,
) -> BranchBuilder:
    """A reproducible builder after ``steps`` random operations drawn from ``operations``."""
    rng = random.Random(seed)
    ops = [op for op in operations if forks or op != "fork"]
    builder = BranchBuilder(session_id=session_id, rng=rng, secrets=secrets)
    return builder.run(rng.choice(ops) for _ in range(steps))


def random_branch(seed: int, steps: int = 60, **kwargs: Any) -> list[SessionEntry]:
    """The current branch (root first) of ``random_builder(seed, steps)``."""
    return list(random_builder(seed, steps, **kwargs).path)


@st.composite
def branch_builders(
    draw: st.DrawFn,
    *,
    min_steps: int = 0,
    max_steps: int = 40,
    forks: bool = True,
    session_id: str = "s1",
    secrets: Sequence[str] = (),
    operations: Sequence[str] = OPERATIONS,
) -> BranchBuilder:
    """Hypothesis strategy for builders; operations shrink towards short, simple lists.

    ``operations`` are the ones drawn from (``SUPERSESSION_OPERATIONS`` adds
    consolidating reflector runs)."""
    ops = [op for op in operations if forks or op != "fork"]
    drawn = draw(st.lists(st.sampled_from(ops), min_size=min_steps, max_size=max_steps))
    rng = draw(st.randoms(use_true_random=False))
    builder = BranchBuilder(session_id=session_id, rng=rng, secrets=secrets)
    return builder.run(drawn)


def branches(**kwargs: Any) -> st.SearchStrategy[list[SessionEntry]]:
    """Hypothesis strategy for branch entry lists (root first)."""
    return branch_builders(**kwargs).map(lambda b: list(b.path))
