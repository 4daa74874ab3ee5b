"""Issue 28 item 2: a stderr nobody reads never stops the inspect page from answering.

Every request for a damaged session logs one line on stderr. A launcher that reads the
server's stderr only until the announcement leaves a pipe that fills; a server writing its
log lines from the event loop then blocks on the full pipe and stops answering every
request. The pipe is shrunk to one page here, so a few dozen lines fill it many times over.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

import httpx
from support.damaged_store import damage_jsonl_line, filled_store
from support.inspect_server import serving_process

# Each answer logs a line of a few hundred bytes: this many fill a 4 KiB pipe ten times.
REQUESTS = 150
PIPE_BYTES = 4096


async def test_the_page_answers_with_its_stderr_pipe_full(tmp_path: Path) -> None:
    url = await filled_store("jsonl", tmp_path)
    damage_jsonl_line(tmp_path / "store", "demo", 5)
    with serving_process(url, cwd=tmp_path) as (base, _, process):
        assert process.stderr is not None
        fcntl.fcntl(process.stderr.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        # A server that blocks fails the request on its timeout; nothing here is timed.
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            for _ in range(REQUESTS):
                response = await client.get("/s/demo")
                assert response.status_code == 500, response.text[:300]
                assert "line 5" in response.text
            assert (await client.get("/s/other-session")).status_code == 200
        # What could be written reaches the pipe: it is full of the server's own lines.
        assert process.poll() is None
        head = process.stderr.read(PIPE_BYTES // 2)
        assert "prism-om: inspect: GET /s/demo: 500 CorruptStoreError" in head
