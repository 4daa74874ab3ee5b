"""The conformance suites over ``DictStore``, an outside adapter over plain dicts.

Its writes never yield to the event loop, so the cancellation tests must cancel some
calls before they start to see a cancellation at all; it uses only the helpers
``StoreBase``'s docstring names.
"""

from __future__ import annotations

import ast
import inspect

import pytest

from prism_om.core.ledger import ObservationalMemoryLedger
from prism_om.stores import SessionStore, StoreBase
from prism_om.testing import dict_store
from prism_om.testing.conformance import StoreConformance, StoreOpener
from prism_om.testing.dict_store import DictStore
from prism_om.testing.generate import make_message
from prism_om.testing.memory_conformance import MemoryConformance


@pytest.fixture
def store_opener() -> StoreOpener:
    async def open_dict() -> SessionStore:
        return DictStore()

    return StoreOpener(open_dict, persistent=False)


class TestDictStoreConformance(StoreConformance):
    """Every store rule, over a store whose writes never yield."""


class TestDictStoreMemoryConformance(MemoryConformance):
    """Every memory read, answered by ``StoreBase`` over the dict adapter's tree."""


def test_the_dict_adapter_imports_only_public_names() -> None:
    tree = ast.parse(inspect.getsource(dict_store))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            assert not any(p.startswith("_") and p != "__future__" for p in parts), node.module
            assert not any(alias.name.startswith("_") for alias in node.names), node.module


async def test_derived_reads_use_an_overridden_ledger() -> None:
    calls: list[str | None] = []

    class FastLedger(DictStore):
        async def ledger(
            self, session_id: str, leaf_id: str | None = None
        ) -> ObservationalMemoryLedger:
            calls.append(leaf_id)
            return await StoreBase.ledger(self, session_id, leaf_id)

    async with FastLedger() as store:
        await store.append(make_message("s", "m", None, "user", "hi", 1))
        await store.live_ledger("s")
        await store.memory_subset("s", ["abcdefabcdef"], "m")
    assert calls == [None, "m"]
