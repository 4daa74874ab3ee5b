"""Python run as the unprivileged user ``nobody``, wherever the checkout lives.

As root every permission check passes, so a test of what a user without write access
sees runs its reader as ``nobody`` (``runuser``). That user cannot read a checkout, or the
virtual environment inside it, under a ``0700`` directory (what ``mktemp -d`` makes), nor
an interpreter under ``/root`` (pyenv's). So ``python_for_nobody`` sets up, once per test
session, what ``nobody`` needs in a world-readable directory of its own: a copy of
``prism_om`` and of every distribution it depends on (read from the installed metadata),
and an interpreter ``nobody`` can run, the system's when it is the same Python, else a copy
of this one's. Nothing is read from the checkout by the other user.

Where no other user can be had (not root, or no ``runuser``) the test is skipped, or fails
where CI requires it: ``PRISM_REQUIRE_OTHER_USER=1`` (``.ci/run`` sets it).
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import prism_om

__all__ = ["OTHER_USER", "REQUIRE_VARIABLE", "python_for_nobody", "reachable_dir", "unavailable"]

OTHER_USER = "nobody"
REQUIRE_VARIABLE = "PRISM_REQUIRE_OTHER_USER"
# What the readers import: the stores and the CLI.
_PROBE = "import prism_om.cli.app, prism_om.stores.sqlite, prism_om.stores.jsonl"
_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


def unavailable(reason: str) -> None:
    """Skip the test, or fail it where CI requires another user."""
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_VARIABLE}=1 but no test can run as {OTHER_USER}: {reason}")
    pytest.skip(reason)


def _reachable(path: Path) -> bool:
    """Whether every directory down to ``path`` lets others through (o+x)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


@contextmanager
def reachable_dir(prefix: str) -> Iterator[Path]:
    """A new ``0755`` directory the other user can reach, removed afterwards (with
    whatever modes a test left inside it)."""
    bases = [Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")]
    base = next((b for b in bases if b.is_dir() and _reachable(b)), None)
    if base is None:
        unavailable(f"no temporary directory that {OTHER_USER} can reach")
    where = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    where.chmod(0o755)
    try:
        yield where
    finally:
        for path in [where, *where.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(where)


def _open_to_all(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        wanted = stat.S_IRGRP | stat.S_IROTH
        if path.is_dir() or mode & stat.S_IXUSR:
            wanted |= stat.S_IXGRP | stat.S_IXOTH
        path.chmod(mode | wanted)


def _needed_distributions() -> list[metadata.Distribution]:
    """The distributions ``prism-om`` needs (its base requirements, recursively)."""
    found: dict[str, metadata.Distribution] = {}
    pending = list(metadata.requires("prism-om") or [])
    while pending:
        requirement = Requirement(pending.pop())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        dist = metadata.distribution(name)
        found[name] = dist
        pending.extend(dist.requires or [])
    return list(found.values())


def _copy_packages(site: Path) -> None:
    """``prism_om`` (from wherever it is imported, an editable checkout included) and the
    installed files of every distribution it needs, into ``site``."""
    package = Path(prism_om.__file__).parent
    shutil.copytree(package, site / "prism_om", ignore=shutil.ignore_patterns("__pycache__"))
    for dist in _needed_distributions():
        base = Path(str(dist.locate_file("")))
        for name in dist.files or ():
            if ".." in name.parts or "__pycache__" in name.parts:
                continue  # a script outside site-packages, or bytecode nobody needs
            source = base / name
            if source.is_file():
                target = site / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


def _command(python: str, site: Path, home: Path | None = None) -> list[str]:
    env = [f"PYTHONPATH={site}", "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1"]
    if home is not None:
        env += [f"PYTHONHOME={home}", f"LD_LIBRARY_PATH={home / 'lib'}"]
    return ["runuser", "-u", OTHER_USER, "--", "env", "-i", f"PATH={os.defpath}", *env, python]


def _runs(command: list[str]) -> bool:
    done = subprocess.run([*command, "-c", _PROBE], capture_output=True, cwd="/", timeout=120)
    return done.returncode == 0


def _copy_interpreter(root: Path) -> tuple[str, Path]:
    """This Python's interpreter and standard library (without its tests and
    site-packages), for an interpreter of this very version and build."""
    prefix = Path(sys.base_prefix)
    binary = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    home = root / "python"
    (home / "bin").mkdir(parents=True)
    shutil.copy2(binary, home / "bin" / binary.name)
    library = Path(sysconfig.get_paths()["stdlib"])
    skip = shutil.ignore_patterns("site-packages", "test", "tests", "__pycache__", "idlelib")
    shutil.copytree(library, home / "lib" / library.name, ignore=skip)
    for shared in (prefix / "lib").glob("libpython*.so*"):
        shutil.copy2(shared, home / "lib" / shared.name, follow_symlinks=True)
    return str(home / "bin" / binary.name), home


def python_for_nobody(root: Path) -> list[str]:
    """A command running Python as ``nobody`` with ``prism_om`` importable, set up in
    ``root`` (a directory from ``reachable_dir``)."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        unavailable(f"needs root and runuser to run a reader as the user {OTHER_USER}")
    site = root / "site-packages"
    _copy_packages(site)
    candidates = [
        os.path.realpath(sys.executable),
        os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
        f"/usr/bin/python{_VERSION}",
        f"/usr/local/bin/python{_VERSION}",
    ]
    _open_to_all(root)
    for python in dict.fromkeys(candidates):
        if Path(python).is_file() and _runs(command := _command(python, site)):
            return command
    python, home = _copy_interpreter(root)
    _open_to_all(root)
    command = _command(python, site, home)
    if not _runs(command):
        unavailable(f"{OTHER_USER} can run neither this Python {_VERSION} nor a copy of it")
    return command
