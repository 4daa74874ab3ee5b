"""The shipped test kit (``prism_om.testing``) and its ``testing`` extra.

pytest and hypothesis are not dependencies of prism-om, so each kit module that needs them
must fail on import with a message naming the extra, and ``import prism_om`` must not pull
them in. Each check runs in a fresh interpreter: this process already has both loaded.
"""

from __future__ import annotations

import json
import pkgutil
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import prism_om.testing

EXTRA_MESSAGE = "prism_om.testing needs pytest and hypothesis: pip install 'prism-om[testing]'"
KIT_MODULES = sorted(
    f"prism_om.testing.{info.name}" for info in pkgutil.iter_modules(prism_om.testing.__path__)
)
# Modules that import pytest or hypothesis, directly or through another kit module.
NEEDS_EXTRA = {
    "prism_om.testing._requires",
    "prism_om.testing.conformance",
    "prism_om.testing.conformance_bounds",
    "prism_om.testing.conformance_inputs",
    "prism_om.testing.delete_conformance",
    "prism_om.testing.memory_conformance",
    "prism_om.testing.om_factories",
    "prism_om.testing.search_conformance",
    "prism_om.testing.supersession_conformance",
    "prism_om.testing.tombstone_conformance",
    "prism_om.testing.write_conformance",
}

# A finder, installed before anything else is imported, that refuses pytest and hypothesis
# the way an environment without them would (ModuleNotFoundError naming the module).
BLOCKER = """
import sys
class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {"pytest", "_pytest", "hypothesis"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Refuse())
"""

PROBE = """
import importlib, json, sys
result = {}
for module in sys.argv[1:]:
    try:
        importlib.import_module(module)
    except BaseException as exc:
        result[module] = [type(exc).__name__, str(exc), isinstance(exc, ImportError)]
    else:
        result[module] = None
result["_loaded"] = sorted(
    m for m in sys.modules if m.partition(".")[0] in {"pytest", "_pytest", "hypothesis"}
)
print(json.dumps(result))
"""


def run_probe(modules: list[str], *, blocked: bool) -> dict[str, Any]:
    code = (BLOCKER if blocked else "") + PROBE
    done = subprocess.run(
        [sys.executable, "-c", code, *modules],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_needs_extra_lists_real_kit_modules() -> None:
    # Guards the table above: a renamed module would make the checks below vacuous.
    assert set(KIT_MODULES) >= NEEDS_EXTRA


def test_kit_modules_name_the_extra_when_pytest_and_hypothesis_are_missing() -> None:
    result = run_probe(KIT_MODULES, blocked=True)
    for module in KIT_MODULES:
        outcome = result[module]
        if module in NEEDS_EXTRA:
            assert outcome is not None, f"{module} imported without pytest/hypothesis"
            kind, message, is_import_error = outcome
            assert is_import_error, (module, kind, message)
            assert EXTRA_MESSAGE in message, (module, message)
        else:
            # Every other kit module must import cleanly: a new module that imports pytest
            # or hypothesis without the helper shows up here as a bare ModuleNotFoundError.
            assert outcome is None, (module, outcome)
    assert result["_loaded"] == []


def test_conformance_error_is_an_import_error_naming_the_missing_module() -> None:
    code = (
        BLOCKER
        + """
try:
    import prism_om.testing.conformance
except ImportError as exc:
    print(exc.name, type(exc.__cause__).__name__)
    print(exc)
"""
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    first, message = done.stdout.strip().splitlines()[:2]
    name, cause = first.split()
    assert name in {"pytest", "hypothesis"}
    assert cause == "ModuleNotFoundError"
    assert message.startswith(EXTRA_MESSAGE)
    assert name in message


def test_kit_modules_import_with_the_extra_installed() -> None:
    result = run_probe(KIT_MODULES, blocked=False)
    assert all(result[module] is None for module in KIT_MODULES), result


def test_import_prism_om_loads_neither_pytest_nor_hypothesis() -> None:
    result = run_probe(["prism_om"], blocked=False)
    assert result["prism_om"] is None
    assert result["_loaded"] == []
    # And the package itself works where neither is installed.
    assert run_probe(["prism_om"], blocked=True)["prism_om"] is None


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[;\s]", requirement, maxsplit=1)[0]


def test_testing_extra_declared_and_included_in_test_extra() -> None:
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    names = {requirement_name(req) for req in extras["testing"]}
    assert names == {"pytest", "pytest-asyncio", "hypothesis"}
    assert "prism-om[testing]" in extras["test"]
    deps = {
        req.split(">")[0].split("=")[0].split("<")[0].strip() for req in project["dependencies"]
    }
    assert not deps & names, "the kit's tools must stay optional"


def test_package_docstring_says_how_to_install_and_use_the_kit() -> None:
    doc = prism_om.testing.__doc__ or ""
    assert "prism-om[testing]" in doc
    assert "StoreConformance" in doc and "store_opener" in doc
