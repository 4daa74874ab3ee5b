"""Every line a command prints on stderr passes the secrets redaction.

The reviewer's finding: a damaged entry field holding a secret (a ``timestamp`` of
``sk-live-...``) is quoted by ``InvalidEntryError``, and the CLI's error line, ``--debug``'s
traceback and the inspect server's log printed it as it was.
"""

from __future__ import annotations

import asyncio
import io
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.damaged_store import TIMESTAMP_SECRET, damage_jsonl_line, filled_store
from support.inspect_server import free_port

from prism_om.cli.inspect import is_loopback
from prism_om.cli.redaction import RedactingStream, log_redactor


async def damaged_store(tmp_path: Path) -> str:
    url = await filled_store("jsonl", tmp_path)
    damage_jsonl_line(tmp_path / "store", "demo", 5, secret=TIMESTAMP_SECRET)
    return url


def prism(*args: str, cwd: Path, secrets: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRISM_SECRETS": secrets, "COLUMNS": "120"}
    return subprocess.run(
        [sys.executable, "-m", "prism_om.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


async def test_the_error_line_of_page_is_redacted(tmp_path: Path) -> None:
    url = await damaged_store(tmp_path)
    page = ["page", "--db", url, "--session", "demo", "--cursor", "x"]
    bare = prism(*page, cwd=tmp_path)
    assert bare.returncode != 0 and TIMESTAMP_SECRET in bare.stderr  # what there is to hide
    for given in (
        prism(*page, "--secret", TIMESTAMP_SECRET, cwd=tmp_path),
        prism(*page, cwd=tmp_path, secrets=f"{TIMESTAMP_SECRET}\n"),
    ):
        assert given.returncode == bare.returncode
        assert given.stderr.startswith("prism-om: error: ")
        assert len(given.stderr.strip().splitlines()) == 1
        assert TIMESTAMP_SECRET not in given.stderr and "[REDACTED]" in given.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["status", "--session", "demo"],
        ["view", "--session", "demo"],
        ["page", "--session", "demo", "--cursor", "x", "--debug"],
        ["observe", "--session", "demo", "--force"],
        ["compact", "--session", "demo"],
        ["check"],
        ["check", "--json"],
    ],
)
async def test_every_command_redacts_its_stderr(tmp_path: Path, command: list[str]) -> None:
    url = await damaged_store(tmp_path)
    bare = prism(*command, "--db", url, cwd=tmp_path)
    assert TIMESTAMP_SECRET in bare.stdout + bare.stderr  # each one quotes the damage
    done = prism(*command, "--db", url, cwd=tmp_path, secrets=TIMESTAMP_SECRET)
    assert done.returncode == bare.returncode
    assert TIMESTAMP_SECRET not in done.stderr and TIMESTAMP_SECRET not in done.stdout
    assert "[REDACTED]" in done.stdout + done.stderr


def test_the_inspect_server_log_is_redacted_one_line_per_error(tmp_path: Path) -> None:
    url = asyncio.run(damaged_store(tmp_path))
    port = free_port()
    log = tmp_path / "inspect.err"
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "prism_om.cli", "inspect", "--db", url, "--port", str(port)],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PRISM_SECRETS": TIMESTAMP_SECRET},
        )
    try:
        deadline = time.monotonic() + 60
        while "inspect page at" not in log.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            page = client.get("/s/demo")
            charts = client.get("/s/demo/charts")
            listed = client.get("/")
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert page.status_code == charts.status_code == 500 and listed.status_code == 200
    said = log.read_text()
    assert TIMESTAMP_SECRET not in said + page.text + listed.text
    assert "Traceback" not in said
    errors = [line for line in said.splitlines() if line.startswith("prism-om: inspect: GET")]
    assert len(errors) == 2 and all("[REDACTED]" in line for line in errors)


def test_the_stream_redacts_a_secret_written_in_pieces() -> None:
    out = io.StringIO()
    stream = RedactingStream(out, log_redactor(["sk-live-abc"]))  # type: ignore[arg-type]
    stream.write("key sk-li")
    assert out.getvalue() == ""  # held until the line ends
    stream.write("ve-abc and sk-live%2Dabc\nrest sk-live-")
    stream.writelines(["abc"])
    stream.flush()
    assert out.getvalue() == "key [REDACTED] and sk-live%2Dabc\nrest [REDACTED]"
    quoted = RedactingStream(io.StringIO(), log_redactor(["a b/c"]))  # type: ignore[arg-type]
    quoted.write("GET /s/a%20b%2Fc /s/a+b%2Fc\n")
    assert quoted._stream.getvalue() == "GET /s/[REDACTED] /s/[REDACTED]\n"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("10.0.0.1", False),
        ("example.org", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
async def test_ipv6_loopback_is_served_without_the_warning(tmp_path: Path) -> None:
    from support.inspect_server import serving

    url = await filled_store("sqlite", tmp_path)
    with serving(url, "--host", "::1", cwd=tmp_path) as (page, said):
        assert page.startswith("http://[::1]:")
        assert "warning" not in said
        async with httpx.AsyncClient(base_url=page) as client:
            assert (await client.get("/")).status_code == 200


async def test_sessions_takes_secret_too(tmp_path: Path) -> None:
    url = await filled_store("sqlite", tmp_path)
    done = prism("sessions", "--db", url, "--json", "--secret", "other-session", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "other-session" not in done.stdout and "[REDACTED]" in done.stdout
