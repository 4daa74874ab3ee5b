"""A loopback chat-completions server for provider tests, with no dependencies.

It answers ``POST /v1/chat/completions`` from a queue of scripted replies, streamed (SSE
chunks, tool-call arguments split across several chunks, ``data: [DONE]``) or as one JSON
document, following the request's ``stream`` flag. It records every request, and it
checks tool call/result pairing the way real providers do, answering HTTP 400 when a
transcript breaks it.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "ChatServer",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Stall",
    "pairing_error",
    "running_chat_server",
]

DEFAULT_USAGE = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}


@dataclass
class Reply:
    """A well-formed completion; rendered streamed or not, as the request asks."""

    text: str = ""
    reasoning: str = ""
    reasoning_field: str = "reasoning_content"
    # (id, name, arguments JSON text)
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = field(default_factory=lambda: dict(DEFAULT_USAGE))
    chunk_size: int = 5
    # Stream argument pieces round-robin across calls, as parallel-call servers do.
    interleave: bool = True

    @property
    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


@dataclass
class Raw:
    """An exact status and body, for errors and malformed streams."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"


@dataclass
class Stall:
    """Send ``partial`` (headers first when given), then hang until released."""

    partial: bytes | None = None
    seconds: float = 10.0


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def pairing_error(messages: list[dict[str, Any]]) -> str | None:
    """Why ``messages`` break tool call/result pairing, or None when they keep it.

    Every ``tool`` message must answer a call of the assistant message before it, and
    every call must be answered before the next user or assistant message.
    """
    open_calls: set[str] = set()
    answerable: set[str] = set()
    for position, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in answerable:
                return (
                    f"messages[{position}]: a message with role 'tool' must be a response to "
                    f"a preceding message with 'tool_calls' (tool_call_id {call_id!r})"
                )
            answerable.discard(call_id)
            open_calls.discard(call_id)
            continue
        if open_calls:
            return (
                f"messages[{position}]: an assistant message with 'tool_calls' must be "
                f"followed by tool messages responding to each 'tool_call_id'; missing: "
                f"{sorted(open_calls)}"
            )
        answerable = set()
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                if (
                    not isinstance(call, dict)
                    or call.get("type") != "function"
                    or not isinstance(call.get("function"), dict)
                    or not isinstance(call["function"].get("arguments"), str)
                ):
                    return f"messages[{position}]: malformed tool call {call!r}"
                open_calls.add(call["id"])
            answerable = set(open_calls)
    if open_calls:
        return f"tool calls without a response: {sorted(open_calls)}"
    return None


def _shape_error(body: object) -> str | None:
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "user",
            "assistant",
            "tool",
        ):
            return f"messages[{position}] has no valid role"
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            return "'tools' must be a non-empty array when present"
        for tool in tools:
            if not (
                isinstance(tool, dict)
                and tool.get("type") == "function"
                and isinstance(tool.get("function"), dict)
                and isinstance(tool["function"].get("name"), str)
            ):
                return f"malformed tool {tool!r}"
    return pairing_error(messages)


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


def render_stream(reply: Reply, model: str, include_usage: bool) -> Iterator[bytes]:
    """The SSE byte chunks of ``reply``."""
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({**base, 'choices': [choice]})}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    yield b": keep-alive comment\n\n"
    for piece in _pieces(reply.reasoning, reply.chunk_size):
        yield chunk({reply.reasoning_field: piece})
    for piece in _pieces(reply.text, reply.chunk_size):
        yield chunk({"content": piece})
    fragments: list[list[dict[str, Any]]] = []
    for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
        head = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        rest = [
            {"index": index, "function": {"arguments": piece}}
            for piece in _pieces(arguments, reply.chunk_size)
        ]
        fragments.append([head, *rest])
    if reply.interleave:
        while any(fragments):
            for queue in fragments:
                if queue:
                    yield chunk({"tool_calls": [queue.pop(0)]})
    else:
        for queue in fragments:
            for fragment in queue:
                yield chunk({"tool_calls": [fragment]})
    yield chunk({}, reply.finish)
    if include_usage and reply.usage is not None:
        yield f"data: {json.dumps({**base, 'choices': [], 'usage': reply.usage})}\n\n".encode()
    yield b"data: [DONE]\n\n"


def render_json(reply: Reply, model: str) -> bytes:
    """The non-streamed completion document of ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message[reply.reasoning_field] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in reply.tool_calls
        ]
    document: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish}],
    }
    if reply.usage is not None:
        document["usage"] = reply.usage
    return json.dumps(document).encode()


class ChatServer(ThreadingHTTPServer):
    """The server; ``url`` is the ``base_url`` to give a provider."""

    # Join handler threads on close, so no test leaves a thread behind.
    daemon_threads = False
    block_on_close = True

    def __init__(self, *, api_key: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.rejections: list[str] = []
        self._replies: deque[Reply | Raw | Stall] = deque()
        self._lock = threading.Lock()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def queue(self, *replies: Reply | Raw | Stall) -> None:
        with self._lock:
            self._replies.extend(replies)

    def next_reply(self) -> Reply | Raw | Stall | None:
        with self._lock:
            return self._replies.popleft() if self._replies else None

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that timed out closes its socket; the late write fails. That is expected.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send_error(400, "invalid JSON body")
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.record(RecordedRequest(self.path, headers, body))
        if not self.path.endswith("/chat/completions"):
            self._send_error(404, f"no route {self.path}")
            return
        expected = self.server.api_key
        if expected is not None and headers.get("authorization") != f"Bearer {expected}":
            given = headers.get("authorization", "").removeprefix("Bearer ")
            # Real services echo (part of) a wrong key; the provider must redact it.
            self._send_error(401, f"Incorrect API key provided: {given}", "invalid_api_key")
            return
        problem = _shape_error(body)
        if problem is not None:
            self.server.rejections.append(problem)
            self._send_error(400, problem)
            return
        reply = self.server.next_reply()
        if reply is None:
            self._send_error(500, "the test scripted no reply for this request")
            return
        model = str(body.get("model", "test-model"))
        if isinstance(reply, Stall):
            if reply.partial is not None:
                self._start(200, "text/event-stream")
                self.wfile.write(reply.partial)
            self.server.release.wait(reply.seconds)
            return
        if isinstance(reply, Raw):
            self._start(reply.status, reply.content_type, len(reply.body))
            self.wfile.write(reply.body)
            return
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._start(200, "text/event-stream")
            for part in render_stream(reply, model, include_usage):
                self.wfile.write(part)
                time.sleep(0)  # let the client see separate chunks
            return
        document = render_json(reply, model)
        self._start(200, "application/json", len(document))
        self.wfile.write(document)

    def _start(self, status: int, content_type: str, length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send_error(self, status: int, message: str, code: str | None = None) -> None:
        document = json.dumps(
            {"error": {"message": message, "type": "invalid_request_error", "code": code}}
        ).encode()
        self._start(status, "application/json", len(document))
        self.wfile.write(document)


@contextmanager
def running_chat_server(*, api_key: str | None = None) -> Iterator[ChatServer]:
    """Serve on 127.0.0.1 (a free port) in a background thread; stop and join on exit."""
    server = ChatServer(api_key=api_key)
    # A short poll interval keeps shutdown() (and so each test's teardown) fast.
    thread = threading.Thread(
        target=server.serve_forever, args=(0.02,), name="chat-server", daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
