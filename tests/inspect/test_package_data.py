"""The page's templates and assets ship in the wheel: the page works from an install."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "prism_om" / "inspect"


@pytest.mark.slow
def test_templates_and_assets_are_in_the_wheel(tmp_path: Path) -> None:
    if importlib.util.find_spec("build") is None or importlib.util.find_spec("hatchling") is None:
        pytest.skip("building the wheel needs the 'build' and 'hatchling' packages")
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "schema.sql"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "prism_om", source / "prism_om", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = tmp_path / "dist"
    command = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist)]
    built = subprocess.run([*command, str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, (built.stdout + built.stderr)[-4000:]
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = [
        f"prism_om/inspect/{path.relative_to(PACKAGE).as_posix()}"
        for folder in ("templates", "static")
        for path in (PACKAGE / folder).iterdir()
    ]
    assert len(wanted) >= 8
    assert sorted(set(wanted) - names) == []
