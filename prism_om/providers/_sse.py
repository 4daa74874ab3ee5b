"""A small incremental decoder for server-sent events, bounded in memory.

It works on raw bytes, not on ``aiter_lines()``, so that a server sending one endless
line fails at ``max_event_bytes`` instead of growing a buffer without limit.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SSEDecoder", "SSEError", "SSEEvent"]


class SSEError(ValueError):
    """The byte stream is not valid server-sent events (or breaks a size bound)."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: its ``event`` field (default ``message``) and its data."""

    event: str
    data: str


class SSEDecoder:
    """Feed bytes in, get complete events out; ``flush()`` at the end of the stream."""

    def __init__(self, max_event_bytes: int = 8 * 1024 * 1024) -> None:
        self._max = max_event_bytes
        self._buffer = bytearray()
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode what ``chunk`` completes; keep any unfinished line for later."""
        self._buffer += chunk
        events: list[SSEEvent] = []
        start = 0
        buffer = self._buffer
        while True:
            cr = buffer.find(b"\r", start)
            lf = buffer.find(b"\n", start)
            if cr == -1 and lf == -1:
                break
            if lf != -1 and (cr == -1 or lf < cr):
                end, next_start = lf, lf + 1
            elif cr + 1 < len(buffer):
                end = cr
                next_start = cr + 2 if buffer[cr + 1] == 0x0A else cr + 1
            else:
                break  # a trailing CR may be the first half of CRLF: wait for more
            self._line(bytes(buffer[start:end]), events)
            start = next_start
        del buffer[:start]
        if len(buffer) > self._max:
            raise SSEError(f"a server-sent-events line exceeds {self._max} bytes")
        return events

    def flush(self) -> list[SSEEvent]:
        """End of stream: an unterminated last line and event still count."""
        events: list[SSEEvent] = []
        if self._buffer:
            line = bytes(self._buffer.rstrip(b"\r"))
            self._buffer.clear()
            self._line(line, events)
        self._dispatch(events)
        return events

    def _line(self, raw: bytes, events: list[SSEEvent]) -> None:
        if not raw:
            self._dispatch(events)
            return
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SSEError("server-sent events are not valid UTF-8") from exc
        if line.startswith(":"):
            return  # a comment, often a keep-alive ping
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data_size += len(raw)
            if self._data_size > self._max:
                raise SSEError(f"a server-sent event exceeds {self._max} bytes")
            self._data.append(value)
        elif name == "event":
            self._event = value
        # ``id`` and ``retry`` only matter to reconnecting browsers; other fields are ignored.

    def _dispatch(self, events: list[SSEEvent]) -> None:
        if self._data:
            events.append(SSEEvent(self._event or "message", "\n".join(self._data)))
        self._data = []
        self._data_size = 0
        self._event = ""
