"""The conformance suites over an adapter that implements only the tree operations."""

from __future__ import annotations

import pytest

from prism_om.stores import SessionStore, SessionTree, StoreBase
from prism_om.testing.conformance import StoreConformance, StoreOpener
from prism_om.testing.memory_conformance import MemoryConformance
from prism_om.testing.tree_only import TreeOnlyStore


@pytest.fixture
def store_opener() -> StoreOpener:
    async def open_tree_only() -> SessionStore:
        return TreeOnlyStore()

    return StoreOpener(open_tree_only, persistent=False)


class TestTreeOnlyStoreConformance(StoreConformance):
    """Every store rule, kept by the tree operations plus ``StoreBase``'s derived reads."""


class TestTreeOnlyMemoryConformance(MemoryConformance):
    """Every memory read, answered by ``StoreBase`` from ``entries()`` alone."""


def test_tree_only_store_overrides_no_read_of_the_base() -> None:
    reads = set(SessionStore.__dict__) - set(SessionTree.__dict__)
    reads = {name for name in reads if not name.startswith("_")}
    assert reads >= {"ledger", "page_messages", "scope_map", "memory_subset"}
    assert not reads & set(TreeOnlyStore.__dict__)
    assert isinstance(TreeOnlyStore(), SessionStore)


def test_an_adapter_missing_a_tree_operation_cannot_be_made() -> None:
    class NoBranch(StoreBase):
        async def append_many(self, entries: object) -> None: ...

    with pytest.raises(TypeError, match="entries"):
        NoBranch()  # type: ignore[abstract]


def test_the_adapter_types_are_exported() -> None:
    import prism_om

    assert prism_om.StoreBase is StoreBase and prism_om.SessionTree is SessionTree
    assert {"StoreBase", "SessionTree", "SessionStore"} <= set(prism_om.__all__)
