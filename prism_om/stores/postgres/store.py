"""``PostgresStore``: the SQLite adapter's reads and rules, on a PostgreSQL server."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.errors
from psycopg import sql as pgsql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..._gc import collector_paused
from ...core.parse import MemoryRecord
from ...core.redaction import hide_url_password
from ...entries import SessionEntry, now_timestamp
from ...errors import (
    CorruptStoreError,
    InvalidInputError,
    ReadOnlyStoreError,
    StoreNotFoundError,
)
from ...tokens import TokenEstimator, get_estimator
from .._rows import rewrite_bodies_as_payloads
from .._schema import SCHEMA_VERSION, newer_version, no_migration, older_read_only
from .._shield import finish_then_cancel
from .._summary import latest_timestamp
from ..arguments import check_entry_id, check_expected_memory_head
from ..base import (
    ANY_MEMORY_HEAD,
    AnyMemoryHead,
    ErasureReport,
    chain_at_leaf,
    check_batch_shape,
    check_memory_head,
    session_not_found,
)
from ..sql.live_pool import backfill_live_pool
from ..sql.memory_folds import backfill_supersessions, write_memory_folds
from ..sql.placement import (
    PlacedEntry,
    Placer,
    check_leaf_session,
    encode_batch,
    first_duplicate,
    first_memory_failure,
    first_rule_failure,
    lookup_parents,
    memory_head_of,
    outside_parent_ids,
)
from ..sql.search_index import (
    backfill_search_index,
    backfill_search_marks,
    index_pending_messages,
    pack_message_postings,
)
from ..sql.statements import (
    ADD_TO_SUMMARY_SQL,
    DELETE_SESSION_SQL,
    ERASED_TABLES,
    INSERT_ENTRY_SQL,
    INSERT_SEGMENT_SQL,
    LEAF_BY_SESSION_SQL,
    MESSAGE_DATA_COLUMN_SQL,
    ROW_DEPTH,
    ROW_SEGMENT,
    ROW_SEQ,
    ROW_TOKENS,
    SESSION_ENTRY_COUNT_SQL,
    LeafPosition,
)
from .connect import DEFAULT_CONNECT_TIMEOUT_S, first_connection, pool_timeout_error
from .connection import (
    PgConnection,
    PoolReader,
    configure_connection,
    drop_dead_connections,
    translate_pg_error,
)
from .dialect import postgres_schema
from .reads import PostgresReads

T = TypeVar("T")
ENCODE_IN_THREAD = 1000
# Segments placed in a batch are numbered below this until the identity column hands out
# their real ids; stored segment ids are positive, so the two never meet.
_LOCAL_SEGMENT_BASE = -(1 << 62)
# The planner plans on statistics, and autovacuum gathers them only after a while (a
# minute's nap, then 10% of the table changed). Until then a table filled in one go has
# none: a page's depth range looks like a few rows, and PostgreSQL reads the whole rest
# of the branch (Bitmap Heap Scan) to sort it instead of walking the (segment_id, depth)
# index and stopping after the page. So the store analyzes the tables it writes each
# time the entries table doubles by its appends (from this many entries): a handful of
# ANALYZEs however long the session, statistics within 2x of what it wrote. The table's
# size at open is the server's estimate (pg_class.reltuples, from the last ANALYZE), so a
# store opened on a long table does not analyze it again after its first few appends.
_ANALYZE_FIRST_AT = 1000
# Rows of the entries table at its last ANALYZE (reltuples; -1 when never analyzed).
ANALYZED_ROWS_SQL = (
    "SELECT coalesce(max(reltuples), 0)::bigint FROM pg_class WHERE oid = to_regclass('entries')"
)
_ANALYZED_TABLES = (
    "entries, segments, om_observations, om_observation_sources, om_reflections, "
    "om_drops, om_markers, om_scope_records, om_supersessions, search_terms, search_blocks, "
    "search_indexed"
)
DEFAULT_SCHEMA = "public"
# PostgreSQL-only statements (user_version, advisory locks and sequences have no SQLite
# twin); everything else is SQLite's SQL transpiled by dialect.postgres_sql.
META_TABLE_SQL = (
    "CREATE TABLE IF NOT EXISTS prism_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
)
META_VERSION_SQL = "SELECT value FROM prism_meta WHERE name = 'schema_version'"
META_EXISTS_SQL = "SELECT to_regclass('prism_meta') IS NOT NULL"
# Appends and checkouts of one session queue on this lock until their transaction ends;
# other sessions' writes go on in parallel.
SESSION_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
# Creating the tables twice at once (two processes opening a new database) would race.
SCHEMA_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('prism_om schema', 0))"
NEXT_SEQS_SQL = (
    "SELECT nextval(pg_get_serial_sequence('entries', 'seq')) FROM generate_series(1, %s)"
)
NEXT_SEGMENTS_SQL = (
    "SELECT nextval(pg_get_serial_sequence('segments', 'segment_id')) FROM generate_series(1, %s)"
)


# Migrations from an older prism_meta schema_version, keyed by the version they start at
# (docs/design.md "Schema versions"); version 2 is the first the PostgreSQL engine wrote.
async def _add_supersessions(conn: PgConnection) -> None:
    """Version 2 to 3: create the om_supersessions fold table and fill it from the
    reflection records (every schema statement is ``IF NOT EXISTS``, so the others pass)."""
    for statement in postgres_schema():
        await conn.raw.execute(cast(Any, statement))
    await backfill_supersessions(conn)


async def _v4_live_pool(conn: PgConnection) -> None:
    """Version 3 to 4: create the om_live pool and fill it from the fold tables."""
    for statement in postgres_schema():
        await conn.raw.execute(cast(Any, statement))
    await backfill_live_pool(conn)


async def _v4_row_shape(conn: PgConnection) -> None:
    """Version 3 to 4: entry bodies hold the payload only, the envelope stays in its
    columns (``stores/_rows.py``)."""
    await rewrite_bodies_as_payloads(conn)


async def _v4(conn: PgConnection) -> None:
    """Version 3 to 4: both changes of that version, in the one transaction. The bodies
    are rewritten first; the live pool is built from the fold tables alone."""
    await _v4_row_shape(conn)
    await _v4_live_pool(conn)


async def _v5_search_index(conn: PgConnection) -> None:
    """Version 4 to 5: create the search index and fill it from the entries and
    fold rows."""
    for statement in postgres_schema():
        await conn.raw.execute(cast(Any, statement))
    await backfill_search_index(conn)


async def _v6_search_marks(conn: PgConnection) -> None:
    """Version 5 to 6: create search_indexed and mark every segment indexed to its last
    entry (version 5 indexed each message in its append)."""
    for statement in postgres_schema():
        await conn.raw.execute(cast(Any, statement))
    await backfill_search_marks(conn)


async def _v7_message_data(conn: PgConnection) -> None:
    """Version 6 to 7: the entries.data column of a message entry's data (NULL on every
    row so far; PostgreSQL adds a nullable column without rewriting the table)."""
    await conn.raw.execute(
        MESSAGE_DATA_COLUMN_SQL.replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS")
    )


async def _v8_packed_search(conn: PgConnection) -> None:
    """Version 7 to 8: create search_blocks and pack the messages' postings into it
    (``search_index.pack_message_postings``)."""
    for statement in postgres_schema():
        await conn.raw.execute(cast(Any, statement))
    await pack_message_postings(conn)


MIGRATIONS: dict[int, Callable[[PgConnection], Awaitable[None]]] = {
    2: _add_supersessions,
    3: _v4,
    4: _v5_search_index,
    5: _v6_search_marks,
    6: _v7_message_data,
    7: _v8_packed_search,
}


def split_postgres_url(url: str) -> tuple[str, str, str]:
    """``(conninfo, schema, shown url)``: the ``schema`` option removed, the password hidden."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgresql", "postgres"}:
        raise InvalidInputError(f"not a PostgreSQL URL: {hide_url_password(url)!r}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key in {"schema", "search_path"}]
    rest = [(key, value) for key, value in query if key not in {"schema", "search_path"}]
    schema = schemas[-1] if schemas else DEFAULT_SCHEMA
    if not schema or "," in schema:
        raise InvalidInputError(f"store URL option schema={schema!r} must name one schema")
    conninfo = urlunsplit(parts._replace(scheme="postgresql", query=urlencode(rest)))
    return conninfo, schema, hide_url_password(url)


class PostgresStore(PostgresReads):
    """A ``SessionStore`` on a PostgreSQL server; open it with ``await PostgresStore.open(url)``.

    Same tables (``schema.sql`` transpiled), same queries (transpiled), same rules and
    errors as ``SqliteStore``; see the package docstring for what differs.
    """

    def __init__(
        self,
        url: str,
        pool: AsyncConnectionPool[Any],
        estimator: TokenEstimator,
        *,
        read_only: bool,
        analyzed_rows: int = 0,
        lane: psycopg.AsyncConnection[Any] | None = None,
    ) -> None:
        self.url = url
        self._pool = pool
        # SqlReads reads through _reader.execute_fetchall (connection.SqlReader).
        self._reader = PoolReader(pool, url, lane)
        self._estimator = estimator
        self._read_only = read_only
        self._damaged = None
        self._writes: set[asyncio.Task[Any]] = set()
        self._appended = 0
        self._analyzed_rows = max(0, analyzed_rows)
        self._analyze_at = max(_ANALYZE_FIRST_AT, self._analyzed_rows)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        read_only: bool = False,
        create: bool = True,
        pool_size: int = 4,
        timeout_s: float = 30.0,
        token_estimator: TokenEstimator | None = None,
        connect_timeout_s: float | None = None,
    ) -> PostgresStore:
        """Connect, then create (or check) the schema in the URL's ``schema`` option.

        ``timeout_s`` bounds the wait for a server connection (at open and for each call)
        and each wait for a lock on the server; past it a call raises ``StoreBusyError``
        rather than hang. A bounded read (leaf, page, recall, recent messages, entries by
        a few ids) the server has not answered ``timeout_s`` + 1 s after it was sent is
        cancelled and raises ``StoreBusyError`` as well: at once when the server answers
        the cancel, within 5 s more when it does not (psycopg then closes the connection).
        ``connect_timeout_s`` (default: 3 s, or ``timeout_s`` when shorter) bounds the open's
        own wait for a server that refuses connections or is starting up, so a wrong port
        fails within it rather than after ``timeout_s``.
        ``create=False`` and ``read_only=True`` refuse a database without the prism_om tables
        (``StoreNotFoundError``) and never create them; read-only connections are also
        read-only on the server (``default_transaction_read_only``).
        """
        conninfo, schema, shown = split_postgres_url(url)
        # lock_timeout bounds every wait for a lock (a table a migration holds, a session's
        # advisory lock) by the same timeout_s, so a call raises StoreBusyError rather than
        # wait forever. Bounded reads also have a client-side deadline (PoolReader); a
        # long read that waits for nothing is not cut (no statement_timeout).
        options = f"-c search_path={schema} -c lock_timeout={max(1, round(timeout_s * 1000))}"
        if read_only:
            options += " -c default_transaction_read_only=on"
        kwargs: dict[str, Any] = {"autocommit": True, "options": options}
        # The first connection is the open's own (connect.py): a server that cannot be
        # reached says why at once, or after the connect wait when waiting could have helped.
        wait = (
            min(timeout_s, DEFAULT_CONNECT_TIMEOUT_S)
            if connect_timeout_s is None
            else connect_timeout_s
        )
        first = await first_connection(conninfo, shown, wait, **kwargs)
        try:
            await configure_connection(first)
            await _prepare_schema(PgConnection(first), schema, shown, read_only, create)
            row = await (await first.execute(ANALYZED_ROWS_SQL)).fetchone()
            # No connection made ahead (min_size=0): the open's own serves the reads
            # (PoolReader's first lane), and writes take pooled ones as they come.
            pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                conninfo,
                min_size=0,
                # One more than pool_size: the reader keeps one connection for reads.
                max_size=pool_size + 1,
                kwargs=kwargs,
                configure=configure_connection,
                timeout=timeout_s,
                open=False,
            )
            await pool.open()
        except BaseException as exc:
            await first.close()
            if isinstance(exc, psycopg.Error):
                raise translate_pg_error(shown, "open", exc) from exc
            raise
        estimator = token_estimator or get_estimator()
        analyzed = int(row[0]) if row else 0
        return cls(shown, pool, estimator, read_only=read_only, analyzed_rows=analyzed, lane=first)

    # -- the SessionStore protocol ----------------------------------------------------

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        batch = check_batch_shape(entries, url=self.url)
        self._open_writer()
        if not batch:
            return
        encoded = await _encode(batch, self._estimator)

        async def work(conn: PgConnection) -> None:
            await _lock_session(conn, batch[0].session_id)
            await self._append_in(conn, batch, encoded)

        await self._writing("append", work, batch)
        await self._analyze_after(len(batch))

    async def append_at_leaf(
        self,
        entries: Sequence[SessionEntry],
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> builtins.list[SessionEntry]:
        batch = check_batch_shape(entries, url=self.url)
        expected_memory_head = check_expected_memory_head(expected_memory_head)
        self._open_writer()
        if not batch:
            return []
        session_id = batch[0].session_id

        async def work(conn: PgConnection) -> builtins.list[SessionEntry]:
            # The leaf is read under the session's lock, inside the write transaction, so
            # no other writer (task, process or host) appends between reading and writing.
            await _lock_session(conn, session_id)
            rows = await conn.execute_fetchall(LEAF_BY_SESSION_SQL, (session_id,))
            leaf = rows[0][0] if rows else None
            head = None
            if leaf is not None and expected_memory_head is not ANY_MEMORY_HEAD:
                _, segment_id, depth, path_tokens, encoding = rows[0]
                position = LeafPosition(leaf, segment_id, depth, path_tokens, encoding)
                head = await memory_head_of(position, conn.execute_fetchall)
            check_memory_head(session_id, expected_memory_head, head)
            chained = chain_at_leaf(batch, leaf)
            await self._append_in(conn, chained, await _encode(chained, self._estimator))
            return chained

        chained = await self._writing("append", work, batch)
        await self._analyze_after(len(chained))
        return chained

    async def checkout(self, session_id: str, entry_id: str) -> None:
        check_entry_id(entry_id)
        session_id = self._session(session_id)

        async def work(conn: PgConnection) -> None:
            await _lock_session(conn, session_id)
            rows = await conn.execute_fetchall(
                "SELECT session_id FROM entries WHERE id = ?", (entry_id,)
            )
            check_leaf_session(entry_id, session_id, rows[0][0] if rows else None, self.url)
            await conn.execute(
                "UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (entry_id, session_id)
            )

        await self._writing("checkout", work)

    async def delete_session(self, session_id: str) -> int:
        """Erase the session in one transaction, under the session's append lock.

        The rows leave every read at the commit, not the server's files: PostgreSQL keeps
        a deleted row's bytes in its table's files (a plain ``VACUUM``, autovacuum's too,
        only marks their space free for new rows to overwrite in time), and in its WAL,
        and in any WAL archive, replica or backup, until those are recycled. Only
        ``VACUUM FULL`` of the tables (``vacuum_full_sql``) rewrites their files without
        the rows; the WAL and what lies beyond the server are outside a client's reach
        (docs/erasure.md has what was measured). Nothing of that is run here: it locks
        the tables against every read and write for a time that grows with the store.
        """
        session_id = self._session(session_id)
        self._open_writer()

        async def work(conn: PgConnection) -> int:
            await _lock_session(conn, session_id)
            count = (await conn.execute_fetchall(SESSION_ENTRY_COUNT_SQL, (session_id,)))[0][0]
            if not count:
                raise session_not_found(session_id, self.url)
            for statement in DELETE_SESSION_SQL:
                await conn.execute(statement, (session_id,))
            return int(count)

        return await self._writing("delete", work)

    async def erasure_report(self) -> ErasureReport:
        """PostgreSQL keeps a deleted row's bytes in the tables' files until ``VACUUM
        FULL`` rewrites them, and in its WAL until recycled: the statement to run."""
        return ErasureReport(rewrite_statement=self.vacuum_full_sql())

    def vacuum_full_sql(self) -> str:
        """The ``VACUUM FULL`` that rewrites the files of every table ``delete_session``
        deletes from, so a deleted row's bytes leave them. It holds an ``ACCESS
        EXCLUSIVE`` lock on each table while it copies it (every read and write of that
        table waits), needs the tables' owner, and runs outside a transaction block."""
        _, schema, _ = split_postgres_url(self.url)
        tables = ", ".join(f"{_quoted(schema)}.{_quoted(table)}" for table in ERASED_TABLES)
        return f"VACUUM FULL {tables}"

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # A write that has begun completes (the cancellation rule) before the pool goes.
        while self._writes:
            await asyncio.wait(builtins.list(self._writes))
        await self._reader.close()
        await self._pool.close()

    # -- the write transaction --------------------------------------------------------

    async def _analyze_after(self, appended: int) -> None:
        """``ANALYZE`` the store's tables once its appends double the entries (see above)."""
        self._appended += appended
        if self._appended < self._analyze_at:
            return
        # Next when the table has doubled again: its rows now are those at open plus ours.
        self._analyze_at = self._analyzed_rows + 2 * self._appended
        try:
            async with self._pool.connection() as raw:
                await raw.execute(cast(Any, f"ANALYZE {_ANALYZED_TABLES}"))
        except (psycopg.Error, PoolTimeout):
            # The append has committed; statistics only guide the planner, and
            # autovacuum gathers them in its own time.
            pass

    async def _writing(
        self,
        action: str,
        work: Callable[[PgConnection], Awaitable[T]],
        appending: Sequence[SessionEntry] = (),
    ) -> T:
        task = asyncio.ensure_future(self._write(action, work, appending))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        try:
            return await finish_then_cancel(_await(task))
        except CorruptStoreError as exc:
            self._mark_damaged(exc)
            raise

    async def _write(
        self,
        action: str,
        work: Callable[[PgConnection], Awaitable[T]],
        appending: Sequence[SessionEntry],
    ) -> T:
        try:
            async with self._pool.connection() as raw, raw.transaction():
                return await work(PgConnection(raw))
        except psycopg.errors.UniqueViolation as exc:
            # An appended id is already stored: the append's checks read the parents,
            # and the unique index finds every other id. The transaction is aborted
            # (PostgreSQL refuses every statement after an error), so which id it was is
            # looked up after the rollback: no savepoint (two more round trips) around
            # every batch for this rare case.
            duplicate = await first_duplicate(self._reader, appending, self.url)
            if duplicate is None:
                raise translate_pg_error(self.url, action, exc) from exc
            raise duplicate from None
        except PoolTimeout as exc:
            raise await pool_timeout_error(self._pool, self.url, action, exc) from exc
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                # Whether a lost COMMIT landed is unknown, so the write is not retried;
                # the pool drops the dead connections so that the next call succeeds.
                await drop_dead_connections(self._pool)
            raise translate_pg_error(self.url, action, exc) from exc

    async def _index_for_search(self, session_id: str, segment_ids: Sequence[int]) -> None:
        """Index the messages of ``segment_ids`` the search index lacks (``SqliteReads``),
        under the session's lock, so concurrent searches and appends queue on it."""

        async def work(conn: PgConnection) -> None:
            await _lock_session(conn, session_id)
            await index_pending_messages(conn, segment_ids)

        await self._write("index messages for search", work, ())

    async def _append_in(
        self,
        conn: PgConnection,
        batch: Sequence[SessionEntry],
        encoded: Sequence[tuple[str, int]],
    ) -> None:
        session_id = batch[0].session_id
        rows_state = await conn.execute_fetchall(
            "SELECT root_id FROM sessions WHERE session_id = ?", (session_id,)
        )
        root_id = rows_state[0][0] if rows_state else None
        parents = await lookup_parents(conn, outside_parent_ids(batch))
        failure = first_rule_failure(batch, root_id, parents, self.url)
        limit = len(batch) if failure is None else failure[0]
        records: dict[str, MemoryRecord] = {}
        failure = await first_memory_failure(conn, batch, limit, self._parse, records) or failure
        if failure is not None:
            index, error = failure
            raise await first_duplicate(conn, batch[: index + 1], self.url) or error
        # Placed with batch-local numbers, then given ids drawn from the identity columns'
        # sequences: concurrent writers of other sessions never wait on one counter.
        placer = Placer(session_id, parents, 0, _LOCAL_SEGMENT_BASE, self._estimator.name)
        with collector_paused():
            local = [
                placer.place(entry, body, tokens)
                for entry, (body, tokens) in zip(batch, encoded, strict=True)
            ]
        seqs = [r[0] for r in await conn.fetch_native(NEXT_SEQS_SQL, (len(local),))]
        segment_ids: dict[int, int] = {}
        if placer.segments:
            drawn = await conn.fetch_native(NEXT_SEGMENTS_SQL, (len(placer.segments),))
            segment_ids = dict(
                zip((s[0] for s in placer.segments), sorted(r[0] for r in drawn), strict=True)
            )
        seqs.sort()
        with collector_paused():
            rows = [
                (
                    seqs[row[ROW_SEQ] - 1],
                    *row[1:ROW_SEGMENT],
                    segment_ids.get(row[ROW_SEGMENT], row[ROW_SEGMENT]),
                    *row[ROW_SEGMENT + 1 :],
                )
                for row in local
            ]
        segments = [
            (segment_ids[sid], sess, segment_ids.get(parent, parent) if parent else parent, start)
            for sid, sess, parent, start in placer.segments
        ]
        summary = (
            session_id,
            len(batch),
            sum(1 for entry in batch if entry.kind == "message"),
            len(segments),
            latest_timestamp(entry.timestamp for entry in batch),
        )
        # The writes return nothing, so they go to the server together: one round trip (a
        # pipeline) instead of one each. A duplicate id met here is named by _write.
        async with _pipeline(conn.raw):
            if root_id is None:
                await conn.execute(
                    "INSERT INTO sessions (session_id, root_id, leaf_id, created_at) "
                    "VALUES (?, ?, ?, ?)",
                    (session_id, batch[0].id, batch[-1].id, now_timestamp()),
                )
            else:
                await conn.execute(
                    "UPDATE sessions SET leaf_id = ? WHERE session_id = ?",
                    (batch[-1].id, session_id),
                )
            if segments:
                await conn.executemany(INSERT_SEGMENT_SQL, segments)
            await conn.execute(ADD_TO_SUMMARY_SQL, summary)
            await conn.executemany(INSERT_ENTRY_SQL, rows)
        with collector_paused():
            placed = [
                PlacedEntry(entry, row[ROW_SEQ], row[ROW_SEGMENT], row[ROW_DEPTH], row[ROW_TOKENS])
                for entry, row in zip(batch, rows, strict=True)
            ]
        await write_memory_folds(conn, placed, records)
        # A message's search rows are written by the first search that reaches it
        # (stores/sql/search_index.py), not here.
        self._append_fault_point(batch)

    def _open_writer(self) -> None:
        """Check the store may write now: open, not read-only, no damage reported."""
        self._check_open()
        if self._read_only:
            raise ReadOnlyStoreError(
                f"store {self.url!r} was opened read-only: open it without read_only to write",
                url=self.url,
            )
        if self._damaged is not None:
            raise CorruptStoreError(
                f"{self.url} reported damage ({self._damaged}); this store refuses writes "
                "until it is reopened",
                url=self.url,
            )


def _pipeline(raw: psycopg.AsyncConnection[Any]) -> AbstractAsyncContextManager[Any]:
    """Pipeline mode where the client library has it (libpq 14+), else nothing."""
    if psycopg.AsyncPipeline.is_supported():
        return raw.pipeline()
    return contextlib.nullcontext()


def _quoted(identifier: str) -> str:
    """``identifier`` as a PostgreSQL quoted identifier (no connection needed)."""
    return '"' + identifier.replace('"', '""') + '"'


async def _await(task: asyncio.Future[T]) -> T:
    return await task


async def _encode(
    batch: Sequence[SessionEntry], estimator: TokenEstimator
) -> builtins.list[tuple[str, int]]:
    if len(batch) >= ENCODE_IN_THREAD:
        return await asyncio.to_thread(encode_batch, batch, estimator)
    return encode_batch(batch, estimator)


async def _lock_session(conn: PgConnection, session_id: str) -> None:
    await conn.fetch_native(SESSION_LOCK_SQL, (session_id,))


async def _prepare_schema(
    conn: PgConnection, schema: str, url: str, read_only: bool, create: bool
) -> None:
    """Create the tables on first use, or check (and migrate) the version found."""
    raw = conn.raw
    exists = (await (await raw.execute(META_EXISTS_SQL)).fetchone() or (False,))[0]
    if not exists:
        if read_only or not create:
            raise StoreNotFoundError(
                f"no store at {url}: schema {schema!r} holds no prism_om tables", url=url
            )
        async with raw.transaction():
            await raw.execute(SCHEMA_LOCK_SQL)
            await raw.execute(
                pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(schema))
            )
            for statement in postgres_schema():
                await raw.execute(cast(Any, statement))
            await raw.execute(META_TABLE_SQL)
            await raw.execute(
                "INSERT INTO prism_meta (name, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (name) DO NOTHING",
                (str(SCHEMA_VERSION),),
            )
    row = await (await raw.execute(META_VERSION_SQL)).fetchone()
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise newer_version(url, version)
    if version < SCHEMA_VERSION:
        if any(v not in MIGRATIONS for v in range(version, SCHEMA_VERSION)):
            raise no_migration(url, version)
        if read_only:
            # The reads know only the current shape, and a read-only open never migrates.
            how = (
                "'prism-om migrate --db URL', or PostgresStore.open(url) or open_store(url) "
                f"without read_only=True, as a role that may create tables in schema {schema!r}"
            )
            raise older_read_only(url, version, how)
        async with raw.transaction():
            await raw.execute(SCHEMA_LOCK_SQL)
            for step in range(version, SCHEMA_VERSION):
                try:
                    await MIGRATIONS[step](conn)
                except CorruptStoreError as exc:
                    # A step knows the connection, not the server: name it here.
                    raise CorruptStoreError(f"{url}: {exc}", url=url).add_context(
                        entry_id=exc.entry_id
                    ) from exc
            await raw.execute(
                "UPDATE prism_meta SET value = %s WHERE name = 'schema_version'",
                (str(SCHEMA_VERSION),),
            )
