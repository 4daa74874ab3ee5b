"""A store that cannot answer gets the page's own error page, and the rest still shows.

The reviewer's finding: a damaged JSONL line made ``/s/<sid>`` and the charts fragment
Starlette's bare ``text/plain`` 500 (its outermost middleware answered before our guard),
and the sessions list failed whole although ``prism-om sessions`` lists that store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from support.damaged_store import TIMESTAMP_SECRET, damage_jsonl_line, filled_store

from prism_om.errors import StoreBusyError
from prism_om.inspect import create_inspect_app
from prism_om.stores import SessionStore, open_store

BASE = "http://127.0.0.1:8787"


@asynccontextmanager
async def client_for(
    store: SessionStore, secrets: list[str] | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_inspect_app(store, port=8787, secrets=secrets)
    # raise_app_exceptions=False: what a browser sees, even if something escapes the app.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


def assert_error_page(response: httpx.Response, status: int, *needles: str) -> str:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"].startswith("text/html")
    assert 'id="reason"' in response.text
    for needle in needles:
        assert needle in response.text, needle
    return response.text


async def test_a_damaged_jsonl_line_is_an_error_page_and_the_list_still_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = await filled_store("jsonl", tmp_path)
    damage_jsonl_line(tmp_path / "store", "demo", 5)
    async with await open_store(url, read_only=True) as store, client_for(store) as client:
        listed = await client.get("/")
        assert listed.status_code == 200
        assert 'data-session="other-session"' in listed.text
        assert 'data-damaged="demo"' in listed.text and "line 5" in listed.text
        for path in ("/s/demo", "/s/demo/charts", "/s/demo/timeline"):
            assert_error_page(
                await client.get(path), 500, "Store error", "line 5", "prism-om check --repair"
            )
        assert (await client.get("/s/other-session")).status_code == 200
    logged = capsys.readouterr().err
    assert "Traceback" not in logged
    assert "prism-om: inspect: GET /s/demo: 500 CorruptStoreError:" in logged


async def test_a_secret_in_a_damaged_field_is_redacted_on_the_page_and_in_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = await filled_store("jsonl", tmp_path)
    damage_jsonl_line(tmp_path / "store", "demo", 5, secret=TIMESTAMP_SECRET)
    async with (
        await open_store(url, read_only=True) as store,
        client_for(store, [TIMESTAMP_SECRET]) as client,
    ):
        page = assert_error_page(await client.get("/s/demo"), 500, "[REDACTED]")
        listed = (await client.get("/")).text
    assert TIMESTAMP_SECRET not in page and TIMESTAMP_SECRET not in listed
    logged = capsys.readouterr().err
    assert "[REDACTED]" in logged and TIMESTAMP_SECRET not in logged
    assert len(logged.strip().splitlines()) == 1  # one line for the one failed request
    assert "[REDACTED]" in listed  # the list names the damaged session, redacted


async def test_a_sqlite_file_replaced_under_the_server_is_an_error_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = await filled_store("sqlite", tmp_path)
    db = tmp_path / "store.db"
    async with await open_store(url, read_only=True) as store, client_for(store) as client:
        assert (await client.get("/s/demo")).status_code == 200
        # Another program writes something that is not a store over the file.
        db.write_bytes(b"this is not a database " * 400)
        (tmp_path / "store.db-wal").unlink(missing_ok=True)
        responses = {p: await client.get(p) for p in ("/", "/s/demo", "/s/demo/charts")}
    for response in responses.values():
        assert_error_page(response, 500, "Store error")
    logged = capsys.readouterr().err
    assert "Traceback" not in logged and "CorruptStoreError" in logged


async def test_a_busy_store_is_a_503_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = await filled_store("sqlite", tmp_path)
    async with await open_store(url, read_only=True) as store, client_for(store) as client:

        async def busy(*args: object, **kwargs: object) -> None:
            raise StoreBusyError("the store is locked by another process", url=url)

        monkeypatch.setattr(store, "leaves", busy)
        response = await client.get("/s/demo")
    assert_error_page(response, 503, "Store busy", "locked by another process")
    assert response.headers["retry-after"]
    assert "503 StoreBusyError" in capsys.readouterr().err


async def test_an_unexpected_error_is_a_500_page_and_a_redacted_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = await filled_store("sqlite", tmp_path)
    secret = "sk-live-unexpected-0001"
    async with (
        await open_store(url, read_only=True) as store,
        client_for(store, [secret]) as client,
    ):

        async def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError(f"a bug quoting {secret}")

        monkeypatch.setattr(store, "leaves", broken)
        response = await client.get("/s/demo")
    page = assert_error_page(response, 500, "Server error", "unexpected RuntimeError")
    assert secret not in page and "a bug quoting" not in page
    logged = capsys.readouterr().err
    assert "Traceback" in logged and "RuntimeError: a bug quoting [REDACTED]" in logged
    assert secret not in logged


def test_the_damage_helper_keeps_the_file_length(tmp_path: Path) -> None:
    directory = tmp_path / "s"
    directory.mkdir()
    (directory / "x.jsonl").write_bytes(b'{"a":1}\n{"timestamp":"2026-11-30T16:08:58.944Z"}\n')
    before = (directory / "x.jsonl").stat().st_size
    damage_jsonl_line(directory, "x", 2, secret=TIMESTAMP_SECRET)
    assert (directory / "x.jsonl").stat().st_size == before


async def test_the_damaged_list_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import prism_om.inspect.views as views

    monkeypatch.setattr(views, "DAMAGED_SHOWN", 0)
    url = await filled_store("jsonl", tmp_path)
    damage_jsonl_line(tmp_path / "store", "demo", 5)
    async with await open_store(url, read_only=True) as store, client_for(store) as client:
        listed = (await client.get("/")).text
    assert 'data-damaged="demo"' not in listed and "... 1 more" in listed
