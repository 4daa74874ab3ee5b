"""A rule-based state machine per adapter, with the in-memory store as the model.

Every rule runs on the model and on the store under test; both must accept or refuse
the same operations with the same error type, and read back the same state, across
closes and reopens.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from support.postgres import URL_VARIABLE, drop_schema, with_fresh_schema

from prism_om.errors import PrismMemoryError
from prism_om.stores import SessionStore, open_store
from prism_om.stores.memory import MemoryStore
from prism_om.testing.conformance import snapshot
from prism_om.testing.generate import make_message

SESSIONS = ("s1", "s2", "s3")


class StoreMachine(RuleBasedStateMachine):
    kind = "memory"
    # The server of the session's PostgreSQL tests; each example gets its own schema.
    postgres_base = ""

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.tmp = Path(tempfile.mkdtemp(prefix="prism-sm-"))
        self.postgres_url = with_fresh_schema(self.postgres_base) if self.postgres_base else ""
        self.model = MemoryStore()
        self.store: SessionStore = self.run(self.open())
        self.counter = 0
        self.ids: list[tuple[str, str]] = []

    def run(self, coro: Any) -> Any:
        return self.runner.run(coro)

    async def open(self) -> SessionStore:
        if self.kind == "memory":
            return MemoryStore()
        if self.kind == "postgres":
            return await open_store(self.postgres_url)
        suffix = "store" if self.kind == "jsonl" else "store.db"
        return await open_store(f"{self.kind}:{self.tmp / suffix}")

    def both(self, method: str, *args: Any) -> None:
        """Run one call on model and store; outcomes (value or error type) must agree."""
        outcomes = []
        for target in (self.model, self.store):
            try:
                outcomes.append(("ok", self.run(getattr(target, method)(*args))))
            except PrismMemoryError as exc:
                outcomes.append(("error", type(exc)))
        if outcomes[0][0] == "ok" and method in {"append", "append_many"}:
            assert outcomes[1][0] == "ok", outcomes
        else:
            assert outcomes[0] == outcomes[1], (method, args, outcomes)

    def fresh_id(self) -> str:
        self.counter += 1
        return f"m{self.counter}"

    def parent_for(self, sid: str, data: st.DataObject) -> str | None:
        own = [eid for s, eid in self.ids if s == sid]
        if not own:
            return None
        choice = data.draw(st.sampled_from(["leaf", "any"]))
        if choice == "leaf":
            return self.run(self.model.leaf(sid))  # type: ignore[no-any-return]
        return data.draw(st.sampled_from(own))

    @rule(sid=st.sampled_from(SESSIONS), data=st.data())
    def append_one(self, sid: str, data: st.DataObject) -> None:
        eid = self.fresh_id()
        entry = make_message(sid, eid, self.parent_for(sid, data), "user", f"text {eid}", 1)
        self.both("append", entry)
        self.ids.append((sid, eid))

    @rule(sid=st.sampled_from(SESSIONS), size=st.integers(1, 6), data=st.data())
    def append_batch(self, sid: str, size: int, data: st.DataObject) -> None:
        parent = self.parent_for(sid, data)
        batch = []
        for _ in range(size):
            eid = self.fresh_id()
            batch.append(make_message(sid, eid, parent, "assistant", f"text {eid}", 2))
            parent = eid
        self.both("append_many", batch)
        self.ids.extend((sid, e.id) for e in batch)

    @precondition(lambda self: bool(self.ids))
    @rule(data=st.data(), how=st.sampled_from(["duplicate", "ghost-parent", "second-root"]))
    def bad_append(self, data: st.DataObject, how: str) -> None:
        sid, existing = data.draw(st.sampled_from(self.ids))
        if how == "duplicate":
            entry = make_message(sid, existing, None, "user", "dup", 3)
        elif how == "ghost-parent":
            entry = make_message(sid, self.fresh_id(), "ghost", "user", "x", 3)
        else:
            entry = make_message(sid, self.fresh_id(), None, "user", "x", 3)
        good = make_message(sid, self.fresh_id(), existing, "user", "ok", 3)
        self.both("append_many", [good, entry])

    @precondition(lambda self: bool(self.ids))
    @rule(data=st.data())
    def checkout(self, data: st.DataObject) -> None:
        sid, eid = data.draw(st.sampled_from(self.ids))
        other = data.draw(st.sampled_from([sid, *SESSIONS]))
        self.both("checkout", other, eid)

    @rule()
    def reopen(self) -> None:
        if self.kind == "memory":
            return
        self.run(self.store.close())
        self.store = self.run(self.open())

    @invariant()
    def same_state(self) -> None:
        assert self.run(snapshot(self.store)) == self.run(snapshot(self.model))

    def teardown(self) -> None:
        self.run(self.store.close())
        self.runner.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self.postgres_url and os.environ.get(URL_VARIABLE):
            drop_schema(self.postgres_url)


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgres"])
def test_store_state_machine(kind: str, request: pytest.FixtureRequest) -> None:
    base = request.getfixturevalue("postgres_base_url") if kind == "postgres" else ""
    machine = type(
        f"{kind.title()}StoreMachine", (StoreMachine,), {"kind": kind, "postgres_base": base}
    )
    machine.TestCase.settings = settings(
        max_examples=12,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine.TestCase().runTest()
