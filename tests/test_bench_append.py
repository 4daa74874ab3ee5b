"""``bench.append``: both systems get the same batches, and the script prints its figures."""

from __future__ import annotations

import pytest

from bench.append import BATCH, batches, main


def test_the_batches_are_one_chain_of_realistic_messages() -> None:
    data = batches(3)
    assert [len(b) for b in data] == [BATCH] * 4
    flat = [e for b in data for e in b]
    assert flat[0].parent_id is None
    assert all(e.parent_id == prev.id for prev, e in zip(flat, flat[1:], strict=False))
    users = [e.message.text() for e in flat if e.message and e.message.role == "user"]
    assert all(60 <= len(t.split()) <= 140 for t in users)


def test_the_script_prints_both_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--rounds", "2"])
    out = capsys.readouterr().out
    assert "wall: prism" in out and "cpu:  prism" in out and "token counts alone" in out
