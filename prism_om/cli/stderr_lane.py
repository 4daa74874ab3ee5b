"""A server's stderr that never blocks the server: writes queue, one thread does them.

A server started with its stderr on a pipe nobody reads (a launcher that waits only for
the announcement line) would stop answering once the pipe fills: every log line is
written from the event loop, and a write to a full pipe blocks it. Inside
``nonblocking_stderr()`` a write only queues the text; a daemon thread writes it to the
stream underneath (the redacting one, so redaction is unchanged) and flushes. When more
than ``MAX_PENDING_CHARS`` wait, further writes are dropped and counted, and the count is
said in their place once the stream drains. At the end, what still waits is written for
at most ``DRAIN_SECONDS``; a stream that stays blocked is left behind with the thread.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TextIO

__all__ = ["DRAIN_SECONDS", "MAX_PENDING_CHARS", "StderrLane", "nonblocking_stderr"]

MAX_PENDING_CHARS: Final = 1 << 20
DRAIN_SECONDS: Final = 2.0


class _Dropped:
    """Stands in the queue for a run of writes dropped while it was full."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 1

    def notice(self) -> str:
        return f"prism-om: {self.count} write(s) to stderr dropped: stderr was not being read\n"


class StderrLane:
    """A text stream whose ``write`` queues and returns at once (see the module)."""

    def __init__(self, stream: TextIO, *, max_pending_chars: int = MAX_PENDING_CHARS) -> None:
        self._stream = stream
        self._max = max_pending_chars
        self._queue: deque[str | _Dropped] = deque()
        self._pending = 0
        self._closed = False
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="prism-om-stderr", daemon=True)
        self._thread.start()

    def write(self, text: str) -> int:
        if not text:
            return 0
        with self._ready:
            if self._closed or self._pending + len(text) > self._max:
                last = self._queue[-1] if self._queue else None
                if isinstance(last, _Dropped):
                    last.count += 1
                else:
                    self._queue.append(_Dropped())
            else:
                self._queue.append(text)
                self._pending += len(text)
            self._ready.notify()
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Nothing to wait for: the thread flushes after every write it makes."""

    def close(self, timeout: float = DRAIN_SECONDS) -> None:
        """Stop taking writes; wait at most ``timeout`` seconds for the queued ones."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join(timeout)

    def __getattr__(self, name: str) -> Any:
        # fileno, isatty, encoding: the stream underneath answers them.
        return getattr(self._stream, name)

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return
                item = self._queue.popleft()
                if isinstance(item, str):
                    self._pending -= len(item)
            text = item if isinstance(item, str) else item.notice()
            try:
                self._stream.write(text)
                self._stream.flush()
            except (OSError, ValueError):
                # A closed or broken stderr: there is nobody left to tell.
                continue


@contextmanager
def nonblocking_stderr() -> Iterator[StderrLane]:
    """``sys.stderr`` as a ``StderrLane`` over the current one, for the duration.

    Entered before a server configures its loggers (uvicorn resolves ``sys.stderr`` when
    its ``Config`` is made), so its log lines take the lane too.
    """
    original = sys.stderr
    lane = StderrLane(original)
    sys.stderr = lane
    try:
        yield lane
    finally:
        if sys.stderr is lane:
            sys.stderr = original
        lane.close()
