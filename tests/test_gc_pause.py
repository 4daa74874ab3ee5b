"""The collector pause around bulk parses: overlapping pauses (the reader thread and the
loop) keep it off until the last one ends, and a caller's own gc.disable() is respected."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from prism_om._gc import collector_paused


@pytest.fixture(autouse=True)
def restore_collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_overlapping_pauses_keep_the_collector_off_until_the_last_ends() -> None:
    gc.enable()
    first = collector_paused()
    second = collector_paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the earlier code turned it back on here, mid-parse
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_still_restores_the_collector() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("parse failed")
    assert gc.isenabled()
