"""Opening a PostgreSQL store that cannot connect: the reason at once, or after the wait.

Before ``stores/postgres/connect.py`` the pool made the first connection: an unknown
database or role waited the whole ``timeout_s`` (30 s) and then reported only that no
connection came free, while psycopg_pool logged a warning for every attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from support.pg_connections import watch_connections

from prism_om.cli.app import main
from prism_om.errors import StoreBusyError, StoreError, StoreUnreachableError
from prism_om.stores import open_store
from prism_om.stores.postgres import PostgresStore
from prism_om.testing.generate import make_message

# Longer than any failure that is reported at once, far shorter than the 30 s open wait.
AT_ONCE_S = 10.0


def _with(url: str, *, user: str | None = None, database: str | None = None) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if user is not None:
        netloc = user + "@" + netloc.split("@", 1)[1]
    path = f"/{database}" if database is not None else parts.path
    return urlunsplit(parts._replace(netloc=netloc, path=path))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"database": "prism_no_such_db"}, 'database "prism_no_such_db" does not exist'),
        ({"user": "prism_no_such_role"}, 'role "prism_no_such_role" does not exist'),
    ],
)
async def test_a_failure_waiting_cannot_fix_is_reported_at_once(
    postgres_url: str, change: dict[str, str], said: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = _with(postgres_url, **change)
    with caplog.at_level(logging.WARNING), pytest.raises(StoreUnreachableError) as caught:
        # The default 30 s wait: a retried failure would outlast AT_ONCE_S.
        await asyncio.wait_for(open_store(url), AT_ONCE_S)
    message = str(caught.value)
    assert said in message and "cannot connect to the server" in message
    assert caught.value.url is not None and caught.value.url in message
    assert not isinstance(caught.value.__cause__, StoreError)
    assert isinstance(caught.value.__cause__, psycopg.Error)  # chained, never raised bare
    assert not caplog.records  # no retries, so nothing logged


async def test_a_refused_connection_is_retried_quietly_until_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = "postgresql://nobody:hunter2@127.0.0.1:1/db"
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreUnreachableError) as caught:
        await asyncio.wait_for(PostgresStore.open(url, timeout_s=1), AT_ONCE_S)
    message = str(caught.value)
    assert "no connection to the server within 1 s" in message
    assert "Connection refused" in message and "127.0.0.1:1" in message
    assert "hunter2" not in message and ":***@" in message
    # One line for the whole wait, from prism_om; the pool logged one per attempt.
    logged = [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(logged) == 1, logged
    assert logged[0][0] == "prism_om.stores.postgres"
    assert "waiting up to 1 s" in logged[0][1] and "hunter2" not in logged[0][1]


async def test_a_server_that_answers_during_the_wait_is_used(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]
    calls: list[str] = []

    async def refused_twice(cls: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append("connect")
        if len(calls) <= 2:
            raise psycopg.OperationalError("connection failed: the database system is starting up")
        return await real(cls, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(refused_twice))
    async with await PostgresStore.open(postgres_url, timeout_s=10) as store:
        await store.append(make_message("s", "a", None, "user", "hello", 1))
        assert [e.id for e in await store.list("s")] == ["a"]
    assert len(calls) >= 3  # two refusals, then the open's connection (the pool's after)


TRANSIENT = [
    'connection to server at "127.0.0.1", port 1 failed: Connection refused',
    'connection to server on socket "/tmp/x/.s.PGSQL.5432" failed: No such file or directory',
    "FATAL:  the database system is starting up",
    "FATAL:  the database system is shutting down",
    "FATAL:  sorry, too many clients already",
    "timeout expired",
]
FINAL = [
    'FATAL:  database "x" does not exist',
    'FATAL:  role "x" does not exist',
    'FATAL:  password authentication failed for user "x"',
    'FATAL:  no pg_hba.conf entry for host "1.2.3.4"',
    "failed to resolve host 'no-such-host.invalid': [Errno -2] Name or service not known",
]


@pytest.mark.parametrize("text", TRANSIENT + FINAL)
async def test_which_failures_are_worth_waiting_for(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the driver says decides: waited for (tried again until the open's wait ends),
    or reported after the one attempt."""
    attempts: list[str] = []

    async def failing(cls: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(text)
        raise psycopg.OperationalError(text)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(failing))
    with pytest.raises(StoreUnreachableError) as caught:
        await asyncio.wait_for(
            PostgresStore.open("postgresql://nobody@127.0.0.1:1/db", connect_timeout_s=0.2),
            AT_ONCE_S,
        )
    if text in TRANSIENT:
        assert len(attempts) > 1 and "within 0.2 s" in str(caught.value)
    else:
        assert len(attempts) == 1 and "cannot connect to the server" in str(caught.value)


def test_the_cli_prints_the_reason_on_one_line(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _with(postgres_url, database="prism_no_such_db")
    code = main(["sessions", "--db", url])
    captured = capsys.readouterr()
    assert code != 0
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("prism-om: error: open on postgresql://")
    assert 'database "prism_no_such_db" does not exist' in lines[0]


class _Proxy:
    """A TCP front for the test server that can stop listening and cut its connections:
    a server gone from the store's point of view, without stopping the shared cluster."""

    def __init__(self, postgres_url: str) -> None:
        parts = urlsplit(postgres_url)
        query = dict(parse_qsl(parts.query))
        host = query.pop("host", None) or parts.hostname or "localhost"
        port = int(query.pop("port", None) or parts.port or 5432)
        self._unix = f"{host}/.s.PGSQL.{port}" if host.startswith("/") else None
        self._tcp = (host, port)
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self.port = 0
        user = parts.netloc.split("@", 1)[0] if "@" in parts.netloc else ""
        self._url = (parts, user, query)

    @property
    def url(self) -> str:
        parts, user, query = self._url
        netloc = f"{user}@127.0.0.1:{self.port}" if user else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query)))

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._link, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for writer in list(self._links):
            writer.transport.abort()
        self._links.clear()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._unix is not None:
            up_reader, up_writer = await asyncio.open_unix_connection(self._unix)
        else:
            up_reader, up_writer = await asyncio.open_connection(*self._tcp)
        self._links.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def test_a_server_gone_mid_life_is_unreachable_then_served_again(
    postgres_url: str,
) -> None:
    proxy = _Proxy(postgres_url)
    await proxy.start()
    store = await PostgresStore.open(proxy.url, timeout_s=1)
    try:
        await store.append(make_message("s", "a", None, "user", "hello", 1))
        await proxy.stop()
        # The kept connections are cut and no new one is accepted: after the pool's wait
        # (timeout_s), the reason, not "busy".
        for call in (
            lambda: store.list("s"),
            lambda: store.append(make_message("s", "b", "a", "user", "lost", 2)),
        ):
            with pytest.raises(StoreUnreachableError) as caught:
                await asyncio.wait_for(call(), AT_ONCE_S)
            assert "Connection refused" in str(caught.value), str(caught.value)
        await proxy.start()  # the same port: the server is back
        # The pool reconnects on its own schedule (1 s, 2 s, ... between attempts); until
        # then a call that waits timeout_s in vain is busy, since the server answers.
        back = make_message("s", "b", "a", "user", "back", 2)
        busy = 0
        for _ in range(20):
            try:
                await asyncio.wait_for(store.append(back), AT_ONCE_S)
                break
            except StoreBusyError as exc:
                assert "still reconnecting" in str(exc)
                busy += 1
        assert busy < 20
        assert [e.id for e in await store.list("s")] == ["a", "b"]
    finally:
        await store.close()
        with contextlib.suppress(AssertionError):
            await proxy.stop()


async def test_a_pool_wait_that_runs_out_on_a_live_server_is_busy(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every pooled connection held, as the pool reports it: the server answers the
    # direct attempt, so the wait ran out for want of a free connection, not of a server.
    # (A wait the store's public calls cannot cause on their own: a call holding a
    # connection on a lock wait ends at lock_timeout, which is timeout_s too.)
    async def held(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise PoolTimeout(f"couldn't get a connection after {self.timeout:.2f} sec")

    async with await PostgresStore.open(postgres_url, timeout_s=1, pool_size=1) as store:
        monkeypatch.setattr(AsyncConnectionPool, "getconn", held)
        with pytest.raises(StoreBusyError, match="the pool is busy or still reconnecting"):
            await asyncio.wait_for(
                store.append(make_message("s", "a", None, "user", "hello", 1)), AT_ONCE_S
            )
        monkeypatch.undo()
        await store.append(make_message("s", "a", None, "user", "hello", 1))
        assert await store.leaf("s") == "a"


async def test_the_open_connects_once_and_its_connection_serves_the_reads(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The open's own connection checks the schema and then serves the reads: an open
    # and its first reads cost one server connection (a connection costs ~2 ms, more
    # than the reads), where they cost two in a row.
    async with await PostgresStore.open(postgres_url) as seeded:
        await seeded.append(make_message("s", "a", None, "user", "hello", 1))
    with watch_connections(monkeypatch) as watched:
        store = await PostgresStore.open(postgres_url)
    try:
        assert await store.leaf("s") == "a"
        assert [e.id for e in await store.recent_messages("s", 20)] == ["a"]
        assert len(watched.made) == 1
        assert set(watched.ran_on) == {watched.made[0].info.backend_pid}
        await store.append(make_message("s", "b", "a", "user", "again", 2))
        assert len(watched.made) <= 2
        assert [e.id for e in await store.list("s")] == ["a", "b"]
    finally:
        await store.close()
    assert watched.open() == []  # the open's connection closed with the store


async def test_a_refused_port_fails_within_five_seconds_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default open gives up on a refused port after 3 s of its own clock, not 30, so
    a command fails within 5 s, its start-up included."""
    # The open's retry clock and pause (module hooks for this): no public knob fakes
    # time, and the default wait itself is what is checked.
    from prism_om.stores.postgres import connect

    now = [1000.0]
    attempts: list[int] = []

    async def refused(cls: Any, /, *args: Any, connect_timeout: int, **kwargs: Any) -> Any:
        attempts.append(connect_timeout)
        raise psycopg.OperationalError(
            'connection failed: connection to server at "127.0.0.1", port 1 failed: '
            "Connection refused"
        )

    async def pause(seconds: float) -> None:  # the retry pause, on the fake clock
        now[0] += seconds

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(refused))
    monkeypatch.setattr(connect, "_clock", lambda: now[0])
    monkeypatch.setattr(connect, "_pause", pause)
    with pytest.raises(StoreUnreachableError, match="within 3 s"):
        await PostgresStore.open("postgresql://nobody@127.0.0.1:1/db")
    assert now[0] - 1000.0 <= 3.0
    assert len(attempts) > 1  # retried: a restarting server gets its few seconds
    assert max(attempts) <= 3  # no single attempt outlasts the wait either
