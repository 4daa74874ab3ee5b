"""Imports go down the layers, never up, and no two modules of prism_om import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import prism_om

ROOT = Path(prism_om.__file__).parent
# Bottom to top; a module may import its own layer and the ones below (docs/adapters.md, "Layers").
LAYERS = [
    {"entries", "ids", "errors", "tokens", "_gc", "_extras"},
    {"core"},
    {"stores", "session", "debug"},
    {"observational_memory", "providers"},
    {"workers"},
    {"attach", "host", "extension", "funnel", "importers", "testing", "eval"},
    {"integrations"},
    {"reports"},
    {"cli", "mcp", "inspect"},
    {"__init__"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, *, top_level_only: bool) -> set[str]:
    """prism_om modules ``path`` imports (all of them, or only those run at import time)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = ast.walk(tree) if not top_level_only else _module_level(tree.body)
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            tail = [node.module] if node.module else []
            target = ".".join([*base, *tail] if node.level else tail)
            for alias in node.names:  # ``from . import x`` may name a submodule
                sub = f"{target}.{alias.name}"
                found.add(sub if (ROOT.parent / sub.replace(".", "/")).exists() else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "prism_om" or m.startswith("prism_om.")}


def _module_level(body: list[ast.stmt]) -> list[ast.AST]:
    """Statements run on import: the body and its ``if``/``try`` blocks, not functions."""
    out: list[ast.AST] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If):  # TYPE_CHECKING blocks never run, so skip them here
            guard = ast.unparse(node.test)
            if "TYPE_CHECKING" not in guard:
                out += _module_level(node.body) + _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            out += _module_level(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                out += _module_level(handler.body)
    return out


def layer(module: str) -> int:
    parts = module.split(".")
    return RANK[parts[1] if len(parts) > 1 else "__init__"]


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def test_every_module_imports_only_its_layer_and_below() -> None:
    upward = [
        f"{name} (layer {layer(name)}) imports {target} (layer {layer(target)})"
        for name, path in MODULES.items()
        for target in imports(path, top_level_only=False)  # TYPE_CHECKING imports count
        if layer(target) > layer(name)
    ]
    assert upward == []


def test_core_imports_only_the_bottom_layer_and_itself() -> None:
    allowed = ("prism_om.core", "prism_om.entries", "prism_om.ids", "prism_om.errors")
    outside = [
        f"{name} imports {target}"
        for name, path in MODULES.items()
        if name.startswith("prism_om.core")
        for target in imports(path, top_level_only=False)
        if not target.startswith((*allowed, "prism_om.tokens"))
    ]
    assert outside == []


def test_no_import_cycle_between_modules() -> None:
    graph = {
        name: {t for t in imports(path, top_level_only=True) if t in MODULES and t != name}
        for name, path in MODULES.items()
    }
    for name, targets in graph.items():
        # Importing a.b.c runs package a.b first; a module's own packages are already loading.
        parents = {t.rsplit(".", i)[0] for t in targets for i in range(1, t.count("."))}
        graph[name] = {t for t in targets | parents if t in MODULES and t != name}
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    state: dict[str, int] = {}  # 1 = on the DFS stack, 2 = done
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def _store_attribute_names() -> set[str]:
    """Every attribute the store classes define (public and private), beyond object's."""
    from prism_om.stores.base import StoreBase
    from prism_om.stores.jsonl import JsonlStore
    from prism_om.stores.memory import MemoryStore
    from prism_om.stores.postgres import PostgresStore
    from prism_om.stores.sqlite import SqliteStore

    names: set[str] = set()
    for cls in (StoreBase, MemoryStore, JsonlStore, SqliteStore, PostgresStore):
        for klass in cls.__mro__:
            if klass is not object:
                names.update(vars(klass))
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


def test_no_store_method_is_found_by_name_outside_the_stores() -> None:
    """A fast path is a declared method of the store protocol, called as such: no service,
    command or page looks a store attribute up with getattr/hasattr (an outside adapter
    could never know such a method exists)."""
    store_names = _store_attribute_names()
    found = []
    for name, path in MODULES.items():
        if name.startswith("prism_om.stores"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "hasattr"}
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in store_names
            ):
                found.append(f"{name}:{node.lineno} {node.func.id}(..., {node.args[1].value!r})")
    assert found == []
