"""``prism-om observe --skip-failing``: a message the model always refuses does not stop
every later message from being observed; stderr names it (issue 18 item 4 review)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.chat_server import ChatServer, Raw, Reply

ENTRY_HEADER = re.compile(r"^\[entry (\S+) \|", re.MULTILINE)
POISON = "the filter refuses this"


class FilteringServer(ChatServer):
    """Records one observation per run citing every entry shown; refuses (HTTP 400) any
    prompt that holds ``POISON``, as a content filter does."""

    def next_reply(self) -> Reply | Raw | None:
        body = self.requests[-1].body
        messages = body["messages"]
        tools = {t["function"]["name"] for t in body.get("tools", [])}
        if messages[-1]["role"] != "user" or "record_observations" not in tools:
            return Reply(text="recorded")
        prompt = messages[-1]["content"]
        if POISON in prompt:
            return Raw(400, b'{"error": {"message": "content filter"}}')
        ids = ENTRY_HEADER.findall(prompt)
        arguments = {"observations": [{"text": "seen", "sourceEntryIds": ids}]}
        return Reply(tool_calls=[("call_1", "record_observations", json.dumps(arguments))])


@pytest.fixture
def server() -> Iterator[ChatServer]:
    chat = FilteringServer()
    thread = threading.Thread(target=chat.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield chat
    finally:
        chat.shutdown()
        chat.server_close()
        thread.join(timeout=5)


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prism_om.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "120", "OPENAI_API_KEY": "k"},
    )


def test_observe_skip_failing_skips_the_refused_message(tmp_path: Path, server: ChatServer) -> None:
    records = [
        {"role": "user", "content": f"Message {i}: the concert is on {i + 1} July."}
        for i in range(12)
    ]
    records[5]["content"] += f" {POISON}."
    (tmp_path / "chat.json").write_text(json.dumps(records), encoding="utf-8")
    done = cli(tmp_path, "import", "chat.json", "--session", "c", "--db", "s.db")
    assert done.returncode == 0, done.stderr
    observe = ("observe", "--session", "c", "--db", "s.db", "--force", "--json")
    remote = ("--provider", "openai", "--base-url", server.url, "--model", "m")
    # Without the flag one call is one flush: it fails on the refused chunk.
    plain = cli(tmp_path, *observe, *remote)
    assert plain.returncode == 1
    done = cli(tmp_path, *observe, *remote, "--skip-failing")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    (observer,) = [o for o in result["outcomes"] if o["worker"] == "observer"]
    assert observer["status"] == "ran" and len(observer["skippedIds"]) == 1
    skipped = observer["skippedIds"][0]
    assert "skipped" in done.stderr and skipped in done.stderr
    assert any(skipped in w for w in result["warnings"])
