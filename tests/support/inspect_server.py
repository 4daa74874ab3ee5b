"""``prism-om inspect`` run for real: a subprocess serving a store on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def serving(db: str, *extra: str, cwd: Path, secrets: str = "") -> Iterator[tuple[str, str]]:
    """Start the page; yield its URL and the stderr it printed before serving."""
    with serving_process(db, *extra, cwd=cwd, secrets=secrets) as (url, said, _):
        yield url, said


@contextlib.contextmanager
def serving_process(
    db: str, *extra: str, cwd: Path, secrets: str = ""
) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """``serving``, also yielding the process; its stderr is read no further than the
    announcement (as a launcher that only waits for it does)."""
    port = free_port()
    env = {**os.environ, "PRISM_SECRETS": secrets}
    process = subprocess.Popen(
        [sys.executable, "-m", "prism_om.cli", "inspect", "--db", db, "--port", str(port), *extra],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stderr is not None
        said: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                raise AssertionError(f"prism-om inspect ended early: {''.join(said)}")
            said.append(line)
            if "inspect page at " in line:
                url = line.split("inspect page at ", 1)[1].split()[0]
                yield url, "".join(said), process
                return
        raise AssertionError(f"prism-om inspect never announced its page: {''.join(said)}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
