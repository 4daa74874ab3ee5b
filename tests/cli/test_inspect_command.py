"""``prism-om inspect`` as a user runs it: a real server on loopback, read-only."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
from support.cli import failed, ok, run_cli
from support.inspect_server import free_port, serving
from support.inspect_store import SECRET, fill_store

from prism_om.stores import open_store


def file_bytes(path: str) -> bytes:
    return Path(path).read_bytes()


async def make_store(tmp_path: Path) -> str:
    db = tmp_path / "store.db"
    async with await open_store(f"sqlite:{db}", create=True) as store:
        await fill_store(store)
    return str(db)


async def test_the_page_is_served_on_loopback_from_a_read_only_store(tmp_path: Path) -> None:
    db = await make_store(tmp_path)
    before = file_bytes(db)
    with serving(db, cwd=tmp_path, secrets=SECRET) as (url, said):
        assert url.startswith("http://127.0.0.1:")
        assert "warning" not in said
        async with httpx.AsyncClient(base_url=url) as client:
            page = await client.get("/s/demo")
            assert page.status_code == 200
            assert "[REDACTED]" in page.text and SECRET not in page.text
            assert (await client.post("/s/demo")).status_code == 405
            rebound = await client.get("/", headers={"host": "attacker.example"})
            assert rebound.status_code == 421
    assert file_bytes(db) == before


async def test_another_loopback_host_is_served_only_when_asked(tmp_path: Path) -> None:
    db = await make_store(tmp_path)
    with serving(db, "--host", "127.0.0.2", cwd=tmp_path) as (url, said):
        assert url.startswith("http://127.0.0.2:")
        assert "warning" not in said  # 127.0.0.0/8 is loopback: is_loopback's tests
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/")).status_code == 200


async def test_a_port_in_use_is_one_error_line(tmp_path: Path) -> None:
    db = await make_store(tmp_path)
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
        line = failed(run_cli("inspect", "--db", db, "--port", str(port), cwd=tmp_path), 1)
    assert f"cannot serve the inspect page on 127.0.0.1:{port}" in line


def test_a_missing_store_is_a_usage_error(tmp_path: Path) -> None:
    line = failed(run_cli("inspect", "--db", str(tmp_path / "none.db"), cwd=tmp_path), 2)
    assert "no store at" in line
    assert not (tmp_path / "none.db").exists()


def test_help_names_the_options(tmp_path: Path) -> None:
    text = ok(run_cli("inspect", "--help", cwd=tmp_path))
    for option in ("--db", "--port", "--host", "--open", "--secret", "--tombstone-scope"):
        assert option in text
