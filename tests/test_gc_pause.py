"""Bulk parses pause the cyclic collector and always give it back."""

from __future__ import annotations

import gc

import pytest

from prism_om._gc import collector_paused
from prism_om.errors import CorruptStoreError


def test_paused_inside_and_restored_after_errors() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(CorruptStoreError), collector_paused():
        raise CorruptStoreError("bad row")
    assert gc.isenabled()


def test_left_off_when_the_host_turned_it_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
