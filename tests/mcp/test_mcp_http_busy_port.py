"""``prism-om mcp --http PORT`` on a port another program holds: one error line, exit 1."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.support.cli import failed, ok, run_cli


def test_a_busy_port_is_one_error_line_and_exit_code_1(tmp_path: Path) -> None:
    ok(run_cli("demo", "--db", str(tmp_path / "m.db"), cwd=tmp_path))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        done = run_cli("mcp", "--db", str(tmp_path / "m.db"), "--http", str(port), cwd=tmp_path)
    line = failed(done, 1)
    assert f"127.0.0.1:{port}" in line and "another --http PORT" in line
    assert "MCP over HTTP at" not in done.stderr + done.stdout
