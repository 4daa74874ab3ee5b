"""``StderrLane``: a write never waits for the stream underneath; what overflows is counted."""

from __future__ import annotations

import io
import re
import sys
import threading

from prism_om.cli.stderr_lane import StderrLane, nonblocking_stderr


class _Stuck(io.StringIO):
    """A stream whose writes wait until ``release`` is set: a pipe nobody reads."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def write(self, text: str) -> int:
        self.entered.set()
        self.release.wait()
        return super().write(text)


def test_writes_return_while_the_stream_is_stuck_and_the_overflow_is_counted() -> None:
    stuck = _Stuck()
    lane = StderrLane(stuck, max_pending_chars=100)
    lines = [f"line {n:04d}\n" for n in range(50)]  # 10 characters each
    lane.write(lines[0])
    stuck.entered.wait()  # the thread holds the first line, stuck in the stream
    # Were a write to wait for the stream, this would never return.
    assert [lane.write(line) for line in lines[1:]] == [10] * 49
    stuck.release.set()
    lane.close(timeout=60)
    written = stuck.getvalue()
    # A prefix of the lines, then one notice counting exactly the ones left out.
    match = re.fullmatch(
        r"((?:line \d{4}\n)*)prism-om: (\d+) write\(s\) to stderr dropped: stderr was not "
        r"being read\n",
        written,
    )
    assert match is not None, written
    kept = match.group(1).splitlines(keepends=True)
    # The one being written, then as many as fit in 100 characters.
    assert kept == lines[:11]
    assert int(match.group(2)) == len(lines) - 11


def test_without_overflow_everything_arrives_in_order() -> None:
    out = io.StringIO()
    lane = StderrLane(out)
    for n in range(200):
        lane.write(f"{n}\n")
    lane.close(timeout=60)
    assert out.getvalue() == "".join(f"{n}\n" for n in range(200))


def test_nonblocking_stderr_restores_the_stream_and_delivers() -> None:
    original = sys.stderr
    out = io.StringIO()
    sys.stderr = out
    try:
        with nonblocking_stderr() as lane:
            assert sys.stderr is lane
            print("through the lane", file=sys.stderr)
        assert sys.stderr is out
    finally:
        sys.stderr = original
    assert out.getvalue() == "through the lane\n"
