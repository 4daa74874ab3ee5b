"""The store conformance suite on JSONL with an index sidecar rewritten at every append,
so each reopen inside the suite loads through the index (and its unparsed lines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prism_om.stores.jsonl import store as jsonl
from prism_om.testing.conformance import StoreConformance, StoreOpener
from tests.conftest import opener_for


class TestIndexedJsonlConformance(StoreConformance):
    @pytest.fixture
    def store_opener(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StoreOpener:
        monkeypatch.setattr(jsonl, "_index_due", lambda lines, indexed: lines > indexed)
        return opener_for("jsonl", tmp_path)
