"""``prism-om mcp`` on a damaged store: tool errors and stderr keep a secret out.

A damaged field holding a secret is quoted by the store's error; the server answers it as
a tool error, redacted, and prints nothing of it on stderr (which main() redacts too).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.damaged_store import TIMESTAMP_SECRET, damage_jsonl_line, filled_store


def _rpc(process: subprocess.Popen[str], message: dict[str, Any]) -> dict[str, Any] | None:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(message) + "\n")
    process.stdin.flush()
    if "id" not in message:
        return None
    answer: dict[str, Any] = json.loads(process.stdout.readline())
    return answer


def test_tool_errors_and_stderr_are_redacted(tmp_path: Path) -> None:
    url = asyncio.run(filled_store("jsonl", tmp_path))
    damage_jsonl_line(tmp_path / "store", "demo", 5, secret=TIMESTAMP_SECRET)
    process = subprocess.Popen(
        [sys.executable, "-m", "prism_om.cli", "mcp", "--db", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PRISM_SECRETS": TIMESTAMP_SECRET},
    )
    try:
        hello = {"name": "test", "version": "1"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": hello}
        assert _rpc(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        _rpc(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        answers = [
            _rpc(
                process,
                {
                    "jsonrpc": "2.0",
                    "id": 10 + n,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": {"session_id": "demo"}},
                },
            )
            for n, tool in enumerate(("memory_status", "memory_view"))
        ]
    finally:
        assert process.stdin is not None and process.stderr is not None
        process.stdin.close()
        process.wait(timeout=30)
        said = process.stderr.read()
        process.stderr.close()
        if process.stdout is not None:
            process.stdout.close()
    dumped = json.dumps(answers)
    assert "CorruptStoreError" in dumped and "[REDACTED]" in dumped
    assert TIMESTAMP_SECRET not in dumped and TIMESTAMP_SECRET not in said
