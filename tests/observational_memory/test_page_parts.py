"""The public page of a SQL store is built from message parts, not entries (issue 16).

Counted, not timed: on SQLite and PostgreSQL, a page through the public path builds no
``SessionEntry`` (it built one per row read: 21 for a page of 20), parses the payloads
in one pydantic-core call, and on SQLite reads three columns per row (id, timestamp,
payload) instead of six. The pages are the ones the entry path builds, on every adapter,
for every direction, detail, secret and revocation; a damaged row is still named.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql
from support.forked_sessions import forked_session
from support.old_stores import reference_store
from support.sql_work import statements

from prism_om.entries import SessionEntry
from prism_om.errors import CorruptStoreError
from prism_om.observational_memory import recall_observational_memory_branch_page
from prism_om.observational_memory.page import build_branch_page
from prism_om.stores import SessionStore, _rows, open_store
from prism_om.stores._rows import PART_COLUMNS, message_parts
from prism_om.stores.postgres import split_postgres_url
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.generate import make_message

SECRET = "hunter2-secret"
V3_FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v3.db"


def session() -> list[SessionEntry]:
    """``forked_session`` with messages of every shape: tool calls, parts, a secret."""
    entries = forked_session()
    extra: list[SessionEntry] = []
    parent = entries[59].id  # the trunk's last message
    shapes: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": f"calling with {SECRET}",
            "toolCalls": [{"id": "c1", "name": "lookup", "arguments": {"key": SECRET}}],
        },
        {"role": "tool", "content": "x" * 450, "toolCallId": "c1"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "first part"},
                {"type": "image", "data": "aGk=", "mimeType": "image/png"},
                {"type": "text", "text": f"second part {SECRET}"},
            ],
        },
        {"role": "assistant", "content": "", "toolCalls": [{"id": "c2", "name": "f"}]},
    ]
    for n, message in enumerate(shapes * 3):
        entry = SessionEntry.model_validate(
            {
                "id": f"s{n}",
                "sessionId": "p",
                "parentId": parent,
                "kind": "message",
                "timestamp": f"2025-02-01T00:00:{n:02d}Z",
                "message": message,
            }
        )
        extra.append(entry)
        parent = entry.id
    return entries + extra


async def entry_page(store: SessionStore, cursor: str, **kwargs: Any) -> Any:
    """The page the entry path builds: ``page_messages`` then ``build_branch_page``."""
    leaf, limit, way = kwargs["leaf_id"], kwargs["limit"], kwargs["direction"]
    chosen, more = await store.page_messages("p", cursor, limit, way, leaf)
    return build_branch_page(
        chosen,
        more,
        cursor=cursor,
        limit=limit,
        direction=way,
        detail=kwargs["detail"],
        secrets=kwargs["secrets"],
        invalidated_ids=kwargs["invalidated_ids"],
    )


async def test_public_pages_equal_the_entry_pages_on_every_adapter(store: SessionStore) -> None:
    entries = session()
    await store.append_many(entries)
    revoked = {"t3", "s1", "f1-4", "t40"}
    for leaf in [None, *await store.leaves("p")]:
        branch = await store.entries("p", leaf)
        messages = [e for e in branch if e.message is not None]
        for cursor in [*messages[::9], messages[-1], messages[0]]:
            for limit in (1, 20, 100):
                for way in ("forward", "backward"):
                    for detail in ("summary", "full"):
                        for secrets in (None, [SECRET]):
                            kwargs: dict[str, Any] = {
                                "leaf_id": leaf,
                                "limit": limit,
                                "direction": way,
                                "detail": detail,
                                "secrets": secrets,
                                "invalidated_ids": revoked if secrets else None,
                            }
                            got = await recall_observational_memory_branch_page(
                                store, cursor.id, session_id="p", **kwargs
                            )
                            expected = await entry_page(store, cursor.id, **kwargs)
                            assert got == expected, (leaf, cursor.id, kwargs)
                            pure = recall_observational_memory_branch_page(
                                branch,
                                cursor.id,
                                **{k: v for k, v in kwargs.items() if k != "leaf_id"},
                            )
                            assert got == pure, (leaf, cursor.id, kwargs)
                            if secrets:
                                assert SECRET not in repr(got.to_json())


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Entries built from rows and pydantic-core parses of payloads, while a test runs.

    Private module kept: building an entry and parsing a payload read and write nothing,
    so the driver does not see them; the counts are of ``_rows``' own functions."""
    counts = {"entries": 0, "parses": 0}

    def counting(name: str) -> None:
        original: Callable[..., Any] = getattr(_rows, name)

        def wrapped(*args: Any) -> Any:
            counts["entries"] += 1
            return original(*args)

        monkeypatch.setattr(_rows, name, wrapped)

    for name in ("_message_entry", "_entry", "_whole_wire"):
        counting(name)
    validator = _rows._stored_messages()

    class Counted:
        def validate_json(self, data: Any) -> Any:
            counts["parses"] += 1
            return validator.validate_json(data)

    monkeypatch.setattr(_rows, "_stored_messages", Counted)
    yield counts


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_sql_page_builds_no_entry_and_parses_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, counted: dict[str, int]
) -> None:
    if kind == "postgres":
        store = await open_store(request.getfixturevalue("postgres_url"))
    else:
        store = await open_store(f"sqlite:{tmp_path / 'p.db'}")
    try:
        entries = session()
        await store.append_many(entries)
        cursor = "t10"
        for way in ("forward", "backward"):
            await recall_observational_memory_branch_page(
                store, cursor, session_id="p", limit=20, direction=way
            )  # warm: the branch's pieces are read once
            counted.update(entries=0, parses=0)
            page = await recall_observational_memory_branch_page(
                store, cursor, session_id="p", limit=20, direction=way
            )
            assert len(page.messages) == (20 if way == "forward" else 10)
            assert counted == {"entries": 0, "parses": 1}  # was 21 (11) entries
        # The entry path still builds its entries (the counter counts).
        await store.page_messages("p", cursor, 20)
        assert counted["entries"] == 21
    finally:
        await store.close()


async def test_sqlite_page_rows_are_three_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every statement the public page runs, on whichever connection, counted at the driver.
    with statements(monkeypatch) as traced:
        store = await SqliteStore.open(tmp_path / "p.db")
    async with store:
        await store.append_many(session())
        # A page of 64 or more: a wide page, read another way; the same answer's length.
        page = await recall_observational_memory_branch_page(store, "t1", session_id="p", limit=70)
        assert len(page.messages) == 70
        await recall_observational_memory_branch_page(store, "t10", session_id="p", limit=20)
        with traced.counting() as run:
            await recall_observational_memory_branch_page(store, "t10", session_id="p", limit=20)
        rows_read = [s for s in run.statements if "CAST(body AS BLOB)" in s]
        assert len(rows_read) == 1, run.statements
        assert " ".join(rows_read[0].split()).startswith(f"SELECT {PART_COLUMNS} FROM entries"), (
            rows_read
        )  # was six columns


async def test_a_damaged_row_on_the_public_page_is_named(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    async with await SqliteStore.open(path) as store:
        await store.append_many(session())
    conn = sqlite3.connect(path)
    conn.execute("""UPDATE entries SET body = '{"role": 7}' WHERE id = 't12'""")
    conn.commit()
    conn.close()
    async with await SqliteStore.open(path) as store:
        for limit in (20, 70):  # the loop's connection, then the hop
            with pytest.raises(CorruptStoreError, match="'t12'") as caught:
                await recall_observational_memory_branch_page(
                    store, "t10", session_id="p", limit=limit
                )
            assert caught.value.entry_id == "t12"
            assert caught.value.url == store.url
        # Pages that do not reach it still read.
        page = await recall_observational_memory_branch_page(store, "t20", session_id="p", limit=5)
        assert [m["id"] for m in page.messages] == ["t21", "t22", "t23", "t24", "t25"]


async def test_a_damaged_row_on_a_postgres_page_is_named(postgres_url: str) -> None:
    async with await open_store(postgres_url) as pg:
        await pg.append_many(session())
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        conn.execute("""UPDATE entries SET body = '{"role": 7}' WHERE id = 't12'""")
    async with await open_store(postgres_url) as pg:
        with pytest.raises(CorruptStoreError, match="'t12'") as caught:
            await recall_observational_memory_branch_page(pg, "t10", session_id="p", limit=20)
        assert caught.value.entry_id == "t12"


@pytest.mark.parametrize("as_text", [False, True])
def test_message_parts_name_the_bad_row(as_text: bool) -> None:
    good = [make_message("s", f"m{n}", None, "user", f"text {n}", n) for n in range(3)]

    def body(entry: SessionEntry) -> bytes | str:
        text = _rows.payload_json(entry)
        return text if as_text else text.encode()

    rows: list[tuple[Any, ...]] = [(e.id, e.timestamp, body(e)) for e in good]
    assert message_parts(rows) == [(e.id, e.timestamp, e.message) for e in good]
    unclosed = '{"role": "user", "content": "open' if as_text else b'{"role": "user", "content": "o'
    for bad in ('{"role": 7}', unclosed, 42, '{"role": "user", "content": "a"} {}'):
        damaged = [*rows[:1], ("m-bad", "2025-01-01T00:00:00Z", bad), *rows[1:]]
        with pytest.raises(CorruptStoreError, match="'m-bad'") as caught:
            message_parts(damaged)
        assert caught.value.entry_id == "m-bad"


async def test_a_migrated_version_three_store_pages_as_its_rows_say(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    shutil.copyfile(V3_FIXTURE, path)
    # The branch as the fixture's own rows hold it (support/old_stores.py).
    async with await reference_store(path) as reference:
        sid = (await reference.sessions())[0]
        branch = await reference.entries(sid)
    cursor = next(e.id for e in branch if e.message is not None and e.message.role == "user")
    async with await SqliteStore.open(path) as migrated:
        got = await recall_observational_memory_branch_page(
            migrated, cursor, session_id=sid, limit=20
        )
    assert got == recall_observational_memory_branch_page(branch, cursor, limit=20)
    assert got.messages
