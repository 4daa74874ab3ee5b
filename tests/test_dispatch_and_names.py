"""One dispatch point, a public surface listed by hand, one name per concept."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import prism_om
from prism_om.attach import AttachedObservationalMemory
from prism_om.core import records, scope_map
from prism_om.core.ledger import ObservationalMemoryLedger
from prism_om.observational_memory import _source
from prism_om.observational_memory._source import is_store
from prism_om.stores import MemoryStore, SessionStore

ROOT = Path(prism_om.__file__).parent
DISPATCH = ROOT / "observational_memory" / "_source.py"
SOURCES = {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(ROOT.rglob("*.py"))}


def _functions(tree: ast.AST) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def test_entries_or_store_overloads_live_only_in_the_dispatch_module() -> None:
    elsewhere = [
        f"{path.relative_to(ROOT)}:{fn.name}"
        for path, tree in SOURCES.items()
        if path != DISPATCH
        for fn in _functions(tree)
        if any(ast.unparse(d) == "overload" for d in fn.decorator_list)
        and "SessionStore" in ast.unparse(fn.args)
    ]
    assert elsewhere == []


def _union(node: ast.expr) -> list[str]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union(node.left) + _union(node.right)
    return [ast.unparse(node)]


def test_no_function_outside_the_facades_returns_a_value_or_an_awaitable() -> None:
    # with_work_scope is the specification's "async with" or "await fn()" helper, not a
    # choice between entries and a store.
    mixed = [
        f"{path.relative_to(ROOT)}:{fn.name}"
        for path, tree in SOURCES.items()
        if path != DISPATCH
        for fn in _functions(tree)
        if fn.returns is not None
        and len(members := _union(fn.returns)) > 1
        and any(m.startswith("Awaitable[") for m in members)
        and fn.name != "with_work_scope"
    ]
    assert mixed == []


def test_every_facade_is_defined_in_the_dispatch_module() -> None:
    facades = [
        "build_observational_memory_context_blocks",
        "build_observational_memory_projection",
        "fold_observational_memory_ledger",
        "observations_uncovered_by_reflection",
        "recall_observational_memory",
        "recall_observational_memory_branch_page",
        "render_recent_message_window",
        "select_recent_message_entries",
        "unscanned_entries",
    ]
    for name in facades:
        assert getattr(prism_om, name) is getattr(_source, name), name
        assert getattr(prism_om, name).__module__ == _source.__name__


class _LooksLikeAStore:
    """Has the three methods the old duck test looked for, and nothing else."""

    async def ledger(self, *args: Any) -> ObservationalMemoryLedger:
        return ObservationalMemoryLedger()

    async def branch(self, *args: Any) -> list[Any]:
        return []

    async def append(self, *args: Any) -> None:
        return None


async def test_is_store_is_isinstance_of_the_store_protocol() -> None:
    duck = _LooksLikeAStore()
    assert is_store(duck) is isinstance(duck, SessionStore) is False
    async with MemoryStore() as store:
        assert is_store(store) is isinstance(store, SessionStore) is True
    assert is_store([]) is False
    # Asked again (the answer is remembered per class), every answer stays the same.
    async with MemoryStore() as store:
        assert [is_store(x) for x in (duck, store, [], (), "s")] == [False, True] + [False] * 3


def test_the_package_lists_its_names_without_star_imports() -> None:
    tree = SOURCES[ROOT / "__init__.py"]
    stars = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.names[0].name == "*"]
    assert stars == []


@pytest.mark.parametrize(
    "internal",
    [
        "LedgerBuilder",
        "BranchFacts",
        "IdRequirement",
        "page_around_cursor",
        "AppendHook",
        "BRANCH_PATH_CTE",
        "LeafPosition",
        "PlacedEntry",
        "branch_rows_sql",
    ],
)
def test_internals_are_in_no_public_list(internal: str) -> None:
    import importlib

    listed = []
    for path in SOURCES:
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if internal in getattr(importlib.import_module(name), "__all__", ()):
            listed.append(name)
    assert listed == []


def test_no_type_checking_block_is_empty() -> None:
    empty = [
        str(path.relative_to(ROOT))
        for path, tree in SOURCES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and "TYPE_CHECKING" in ast.unparse(node.test)
        and all(isinstance(s, ast.Pass) for s in node.body)
    ]
    assert empty == []


def test_one_name_per_concept() -> None:
    # The proxied agent is ``.agent``; no second name for it.
    assert not hasattr(AttachedObservationalMemory, "session")
    # Dropped observations are ``dropped_observation_ids``; the ledger view without them
    # is "live" everywhere (``live_ledger``, ``live_observations``).
    assert not hasattr(ObservationalMemoryLedger, "dropped_ids")
    assert not hasattr(ObservationalMemoryLedger, "undropped_observations")
    from prism_om.core import ledger_views

    assert hasattr(ledger_views, "live_ledger")
    assert not hasattr(ledger_views, "without_dropped")


def _constant_values() -> dict[str, str]:
    from prism_om import debug

    values: dict[str, str] = {}
    for module in (records, scope_map, debug):
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str) and value.startswith("om."):
                values[value] = f"{module.__name__}.{name}"
    return values


def test_record_types_and_events_are_spelled_by_their_constants() -> None:
    values = _constant_values()
    assert "om.observations.dropped" in values and "om.append" in values
    literals = []
    for path, tree in SOURCES.items():
        # A constant's own definition, and ``Literal[...]`` annotations, are the spelling.
        skip = {
            id(n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.AnnAssign | ast.Assign) and n.value is not None
        }
        skip |= {
            id(c)
            for n in ast.walk(tree)
            if isinstance(n, ast.Subscript) and ast.unparse(n.value) == "Literal"
            for c in ast.walk(n)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in values and id(node) not in skip:
                literals.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert literals == []
