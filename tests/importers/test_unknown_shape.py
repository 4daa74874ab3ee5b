"""A file that is valid JSON in a shape no importer knows is told so, not "invalid JSON"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prism_om.importers.errors import ImportFormatError
from prism_om.importers.source import read_source


@pytest.mark.parametrize(
    "text",
    [
        # A pretty-printed export of another tool: one JSON object over several lines.
        json.dumps({"conversation": {"turns": [{"speaker": "a", "text": "hi"}]}}, indent=2),
        json.dumps({"messages": "not a list"}, indent=2),
        json.dumps("just a string"),
        json.dumps(42),
    ],
)
def test_valid_json_in_an_unknown_shape_is_named_as_such(tmp_path: Path, text: str) -> None:
    path = tmp_path / "export.json"
    path.write_text(text + "\n")
    with pytest.raises(ImportFormatError) as caught:
        read_source(path.read_bytes(), str(path))
    message = str(caught.value)
    assert "not a known transcript shape" in message
    assert "invalid JSON" not in message and "not JSON" not in message


def test_broken_json_is_still_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "conversation": [1, 2\n}\n')
    with pytest.raises(ImportFormatError, match="invalid JSON"):
        read_source(path.read_bytes(), str(path))
