"""The LangGraph and PydanticAI pages' examples run on every store adapter.

``tests/test_docs_examples.py`` runs every page as written (on SQLite); this runs the two
integration pages with their ``STORE`` set to each adapter's URL. A block that starts
with ``# A second process`` reads back what the earlier ones stored, so it runs only on
the adapters whose data outlives the process.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ["integrations-langgraph.md", "integrations-pydantic-ai.md"]
STORE_LINE = 'STORE = "sqlite:agent.db"'


def store_url(adapter: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if adapter == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return {"memory": "memory:", "jsonl": f"jsonl:{tmp_path / 'store'}"}.get(
        adapter, f"sqlite:{tmp_path / 'agent.db'}"
    )


@pytest.mark.parametrize("adapter", ["memory", "jsonl", "sqlite", "postgres"])
@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs_on_the_adapter(
    page: str, adapter: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = store_url(adapter, tmp_path, request)
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), re.S)
    assert blocks and all(STORE_LINE in b for b in blocks), "every block names its STORE"
    ran = 0
    for number, body in enumerate(blocks, 1):
        if body.startswith("# A second process") and adapter == "memory":
            continue  # an in-memory store is gone with its process
        script = tmp_path / f"block_{number}.py"
        script.write_text(body.replace(STORE_LINE, f"STORE = {url!r}"), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{page} block {number} on {adapter}:\n{done.stderr}"
        ran += 1
    assert ran >= 1
