"""``SqliteStore``: opening a file, and the write transactions over it."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import os
import shlex
import sqlite3
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import aiosqlite

from ..._gc import collector_paused
from ...core.parse import MemoryRecord
from ...entries import SessionEntry, now_timestamp
from ...errors import (
    CorruptStoreError,
    ReadOnlyStoreError,
    StoreError,
    StoreNotFoundError,
)
from ...tokens import TokenEstimator, get_estimator
from .._schema import load_schema
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
from ..sql.memory_folds import write_memory_folds
from ..sql.placement import (
    PlacedEntry,
    Placer,
    check_leaf_session,
    encode_batch,
    first_duplicate,
    first_memory_failure,
    first_rule_failure,
    is_message_chain,
    memory_head_of,
    outside_parent_ids,
    state_and_parents,
)
from ..sql.search_index import index_pending_messages
from ..sql.statements import (
    ADD_TO_SUMMARY_SQL,
    DELETE_SESSION_SQL,
    INSERT_SEGMENT_SQL,
    LEAF_BY_SESSION_SQL,
    ROW_DEPTH,
    ROW_SEGMENT,
    ROW_SEQ,
    ROW_TOKENS,
    SESSION_ENTRY_COUNT_SQL,
    LeafPosition,
    fetch_first_row,
    fetch_rows,
    insert_chain_statements,
    insert_entry_statements,
)
from .connect import (
    DAMAGED_SUFFIX,
    check_open_args,
    current_on_loop,
    later_reader,
    later_writer,
    open_read_only,
    open_reader,
    open_writer,
    prepare_file,
    read_damage_note,
)
from .loop_reads import PointConnection
from .thread_reads import OneHopReads
from .translate import close_quietly, retrying, rollback_quietly, translate_error
from .worker_thread import DirectConnection, ThreadSlot, drive, on_thread

T = TypeVar("T")
# Makes a writer connection not opened yet, and the call that opens it.
LaterWriter = Callable[[], tuple[aiosqlite.Connection, Callable[[], Awaitable[None]]]]
# The same for a reader (``connect.later_reader``).
LaterReader = Callable[[], tuple[aiosqlite.Connection, Callable[[], Awaitable[bool]]]]
# Batches this large are serialised and counted off the event loop.
ENCODE_IN_THREAD = 1000


async def _check_exists(url: str, location: str) -> None:
    """``StoreNotFoundError`` unless there is a file at ``location``."""
    if not await asyncio.to_thread(os.path.exists, location):
        raise StoreNotFoundError(
            f"no store at {location!r} ({url}): the file does not exist", url=url
        )


class SqliteStore(OneHopReads):
    """A ``SessionStore`` in one SQLite file; open it with ``await SqliteStore.open(path)``.

    Every read of ``SessionStore`` is answered from indexes and the memory fold tables,
    so none of them walks the whole branch.
    """

    def __init__(
        self,
        url: str,
        writer: aiosqlite.Connection | None,
        reader: aiosqlite.Connection | None,
        estimator: TokenEstimator,
        *,
        read_only: bool = False,
        later: LaterWriter | None = None,
        later_reader: LaterReader | None = None,
        point: PointConnection | None = None,
    ) -> None:
        self.url = url
        # Without a reader, ``later_reader`` makes one that the first read needing it opens.
        self._later_reader = later_reader
        self._start_reader: Callable[[], Awaitable[bool]] | None = None
        self._reader_starting: asyncio.Future[None] | None = None
        # Without a writer, ``later`` makes one that the first write opens (see open).
        self._later = later
        self._start_writer: Callable[[], Awaitable[None]] | None = None
        # A connection left for later is made on first use (``_reader``, ``_writer``): a
        # reopen served by the loop's own connection makes none (each costs a hop to
        # the builder thread, worker_thread.new_connection). A read-only store has one
        # connection; its writer is never handed out.
        assert reader is not None or later_reader is not None
        assert writer is not None or later is not None
        self._reader_conn = reader
        self._writer_conn = writer
        self._estimator = estimator
        self._read_only = read_only
        self._location = url.removeprefix("sqlite:")
        # Why writes are refused, once a write met a damaged file (here or in another
        # process, which left the note next to the file).
        self._damaged = None if read_only else read_damage_note(self._location)
        # Held across every write transaction: the writer connection has one transaction.
        self._lock = asyncio.Lock()
        self._direct = ThreadSlot()
        self._point = point or PointConnection(None if read_only else self._location)
        # After ``delete_session``: WAL frames its checkpoint could not copy into the file
        # (another process's reader held them); 0 when the erased bytes are gone.
        self.wal_frames_pending = 0

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        synchronous: str = "NORMAL",
        read_only: bool = False,
        create: bool = True,
        token_estimator: TokenEstimator | None = None,
    ) -> SqliteStore:
        """Open the store file at ``path``, check its schema, migrate an older one.

        ``create=False`` refuses (``StoreNotFoundError``) a missing or empty file instead
        of making a store of it. ``read_only=True`` never creates, changes or migrates the
        file: a file of an older schema version raises ``StoreVersionError`` (open it once
        without ``read_only`` to migrate it), and writes raise ``ReadOnlyStoreError`` (see
        the module docstring).
        ``token_estimator`` counts appended entries' tokens (default: ``get_estimator()``);
        ``branch_tokens`` recounts entries counted with another encoding.
        """
        estimator = token_estimator or get_estimator()
        location = os.fspath(path)
        mode = check_open_args(location, busy_timeout_ms, synchronous)
        url = f"sqlite:{location}"
        if read_only:
            await _check_exists(url, location)
            reader = await open_read_only(url, location, busy_timeout_ms)
            return cls(url, reader, reader, estimator, read_only=True)
        # Without create, "rw" keeps SQLite itself from making the file after the check.
        uri_mode = None if create else "rw"

        def later() -> tuple[aiosqlite.Connection, Callable[[], Awaitable[None]]]:
            writer, start = later_writer(url, location, busy_timeout_ms, mode, uri_mode=uri_mode)

            async def start_writer() -> None:
                if not await start():
                    # Changed since the check at open (another process migrated it).
                    await prepare_file(url, writer, mode, load_schema(), create=create)

            return writer, start_writer

        # The usual reopen: the loop's own read-only connection (``loop_reads``) finds the file
        # current (which it never creates), and no thread starts until a read or write
        # needs one.
        point = PointConnection(location)
        if current_on_loop(point):
            reader_later = functools.partial(
                later_reader, url, location, busy_timeout_ms, uri_mode=uri_mode
            )
            return cls(
                url, None, None, estimator, later=later, later_reader=reader_later, point=point
            )
        # Anything else (new, older, newer or foreign, busy, unreadable here) is checked,
        # and reported, by the reader and writer on their threads, as it always was.
        point.close()
        if not create:
            await _check_exists(url, location)
        reader, current = await open_reader(url, location, busy_timeout_ms, uri_mode=uri_mode)
        if current:
            return cls(url, None, reader, estimator, later=later)
        try:
            writer, ready = await open_writer(
                url, location, busy_timeout_ms, mode, uri_mode=uri_mode, probe=False
            )
        except BaseException:
            await close_quietly(reader)
            raise
        try:
            if not ready:
                await prepare_file(url, writer, mode, load_schema(), create=create)
        except BaseException:
            await close_quietly(writer)
            await close_quietly(reader)
            raise
        return cls(url, writer, reader, estimator)

    async def connection_settings(self) -> dict[str, str | int]:
        """The writer connection's live ``journal_mode``, ``synchronous`` (0-3) and
        ``busy_timeout`` (ms), as SQLite reports them: what ``open`` asked for, applied."""
        if not self._read_only:
            async with self._lock:
                await self._writer_started()
        writer = self._open_writer() if not self._read_only else self._open_reader()
        settings: dict[str, str | int] = {}
        for pragma in ("journal_mode", "synchronous", "busy_timeout"):
            rows = await retrying(
                self.url, "read", functools.partial(writer.execute_fetchall, f"PRAGMA {pragma}")
            )
            settings[pragma] = next(iter(rows))[0]
        return settings

    # -- the SessionStore protocol ----------------------------------------------------

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        batch = check_batch_shape(entries, url=self.url)
        self._open_writer()
        if not batch:
            return
        if len(batch) >= ENCODE_IN_THREAD:
            encoded = await asyncio.to_thread(encode_batch, batch, self._estimator)
        else:
            encoded = encode_batch(batch, self._estimator)

        async def work(conn: aiosqlite.Connection) -> None:
            await self._append_in(conn, batch, encoded)

        await self._writing("append", work)

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

        async def work(conn: aiosqlite.Connection) -> builtins.list[SessionEntry]:
            # The leaf is read inside the transaction, so no other writer (thread, task
            # or process) can append between reading it and appending under it.
            rows = await fetch_rows(conn, LEAF_BY_SESSION_SQL, (session_id,))
            leaf = rows[0][0] if rows else None
            head = None
            # The head costs a read per fork on the branch: only a compare pays for it.
            if leaf is not None and expected_memory_head is not ANY_MEMORY_HEAD:
                _, segment_id, depth, path_tokens, encoding = rows[0]
                position = LeafPosition(leaf, segment_id, depth, path_tokens, encoding)
                head = await memory_head_of(
                    position, lambda sql, params: fetch_rows(conn, sql, params)
                )
            check_memory_head(session_id, expected_memory_head, head)
            chained = chain_at_leaf(batch, leaf)
            # The transaction runs on the writer's thread (see _write): off the event loop.
            encoded = encode_batch(chained, self._estimator)
            await self._append_in(conn, chained, encoded)
            return chained

        return await self._writing("append", work)

    async def checkout(self, session_id: str, entry_id: str) -> None:
        check_entry_id(entry_id)
        session_id = self._session(session_id)

        async def work(conn: aiosqlite.Connection) -> None:
            rows = builtins.list(
                await conn.execute_fetchall(
                    "SELECT session_id FROM entries WHERE id = ?", (entry_id,)
                )
            )
            check_leaf_session(entry_id, session_id, rows[0][0] if rows else None, self.url)
            await conn.execute(
                "UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (entry_id, session_id)
            )

        await self._writing("checkout", work)

    async def delete_session(self, session_id: str) -> int:
        """Erase the session in one transaction, then rewrite the file (``VACUUM``).

        The delete runs with ``secure_delete`` on, so the session's rows are zeroed as
        they go. That alone leaves copies: earlier writes made with ``secure_delete`` off
        (SQLite's own default, kept by python.org's builds; Debian's turns it on), a
        migration's rewrite, and page balancing can leave cells behind in a page's free
        space, which no delete reaches. The ``VACUUM`` after the commit rebuilds every
        page from the rows that remain, and the ``wal_checkpoint(TRUNCATE)`` after it
        copies the rebuilt pages into the file and empties the WAL, so the erased text is
        in neither file's bytes, whatever the library's default and the file's history.
        The rewrite costs time and space in proportion to the whole file, not to the
        session (docs/erasure.md: 0.55 s for a 52 MB file, 3.4-8.4 s for 523 MB on a busy
        2-core machine, while other processes' writers wait; free disk space up to twice
        the file's size); appends pay nothing for it.

        A reader in another process holding an old snapshot can keep the checkpoint from
        finishing (it waits ``busy_timeout`` for it first): then ``wal_frames_pending`` is
        the count of WAL frames not yet copied back, and until the next checkpoint
        (``prism-om check``, or at the latest the last close) the erased text is still in
        the database file's bytes. It is 0 when the checkpoint completed. A ``VACUUM``
        that fails (a full disk, a writer in another process holding the file past the
        busy retries) raises the ``StoreError`` it met, saying the session is deleted but
        its text may stay in the file until a ``VACUUM`` succeeds. Copies outside the
        file (backups, the filesystem's own) are not reached.
        """
        session_id = self._session(session_id)
        self._open_writer()

        async def work(conn: aiosqlite.Connection) -> int:
            count = (await fetch_first_row(conn, SESSION_ENTRY_COUNT_SQL, (session_id,)))[0]
            if not count:
                raise session_not_found(session_id, self.url)
            # The pragma answers the connection's setting (builds differ in the default).
            was = (await fetch_first_row(conn, "PRAGMA secure_delete"))[0]
            await conn.execute("PRAGMA secure_delete = ON")
            try:
                for statement in DELETE_SESSION_SQL:
                    await conn.execute(statement, (session_id,))
            finally:
                # The rows are zeroed as they are deleted; appends need not pay for it
                # (the VACUUM below removes what earlier writes left).
                await conn.execute(f"PRAGMA secure_delete = {int(was)}")
            return int(count)

        count = await self._writing("delete", work)
        await finish_then_cancel(self._rewrite(session_id, count))
        return count

    async def _rewrite(self, session_id: str, count: int) -> None:
        """``VACUUM``, then checkpoint, setting ``wal_frames_pending`` (see delete_session)."""
        async with self._lock:
            writer = self._open_writer()
            failed: StoreError | None = None
            try:
                await retrying(self.url, "vacuum", functools.partial(writer.execute, "VACUUM"))
            except StoreError as exc:
                failed = exc
            try:
                pending = await self._checkpoint_locked(writer)
            except StoreError:
                if failed is None:
                    raise
                pending = 0  # the VACUUM's failure is the one to report
        self.wal_frames_pending = pending
        if failed is None:
            return
        location = self._location
        error = type(failed)(
            f"deleted session {session_id!r} ({count:,} entries) from {self.url}, but the "
            f"VACUUM that rewrites the file failed ({failed}): copies of its text that "
            "earlier writes left in the file's free space may stay in its bytes until a "
            f"VACUUM of {location!r} succeeds (it needs free disk space about twice the "
            f"file's size; e.g. sqlite3 {shlex.quote(location)} VACUUM)",
            url=self.url,
            session_id=session_id,
        )
        if isinstance(error, CorruptStoreError):
            self._mark_damaged(error)
        raise error from failed

    async def _checkpoint_locked(self, writer: aiosqlite.Connection) -> int:
        """Checkpoint and empty the WAL (hold ``_lock``); the frames left in it when
        readers blocked that."""
        rows = await retrying(
            self.url,
            "checkpoint",
            functools.partial(writer.execute_fetchall, "PRAGMA wal_checkpoint(TRUNCATE)"),
        )
        # (busy, frames in the WAL, frames checkpointed); -1s when the file is not in WAL.
        busy, logged, done = next(iter(rows), (0, 0, 0))
        if not busy and done >= logged:
            return 0
        return max(int(logged) - max(int(done), 0), 1)

    async def erasure_report(self) -> ErasureReport:
        """The WAL frames the latest delete's checkpoint could not copy back (another
        process was reading): the erased text stays in the file until a checkpoint."""
        return ErasureReport(wal_frames_pending=self.wal_frames_pending)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._point.close()
        if self._reader_starting is not None:
            # A reader being opened now is closed below, once it is open.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._reader_starting)
        # Wait for a running write transaction to finish before closing its connection.
        async with self._lock:
            # A reader holds nothing to lose; the writer's close checkpoints the WAL, so
            # its errors are reported.
            if self._reader_conn is not None:
                await close_quietly(self._reader_conn)
            try:
                if self._writer_conn is not None:
                    await self._writer_conn.close()
            except sqlite3.Error as exc:
                raise translate_error(self.url, "close", exc) from exc

    def __del__(self) -> None:
        # An instance whose __init__ never ran has no connections to warn about.
        if "_writer_conn" in self.__dict__ and not self._closed:
            warnings.warn(
                f"store {self.url!r} was garbage-collected unclosed; use 'async with' "
                "or 'await store.close()'",
                ResourceWarning,
                stacklevel=1,
                source=self,
            )
            # Stop the worker threads now rather than at exit (they are daemons, see
            # worker_thread.new_connection, so a leaked store never blocks the exit).
            for conn in (self._reader_conn, self._writer_conn):
                if conn is not None:
                    conn.stop()

    async def _write(self, action: str, work: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction under the writer lock.

        A rule error (or any exception) from ``work`` rolls everything back. A busy file
        retries the whole transaction, which is safe because nothing of it was kept. A
        cancelled caller waits for the transaction to commit or roll back (see
        ``SessionStore``): aiosqlite runs a statement to its end whatever happens to the
        coroutine awaiting it, so abandoning one could leave the writer in a transaction
        that holds the file's write lock.
        """
        return await finish_then_cancel(self._write_locked(action, work))

    async def _write_locked(
        self, action: str, work: Callable[[aiosqlite.Connection], Awaitable[T]]
    ) -> T:
        async with self._lock:
            self._open_writer()
            await self._writer_started()
            writer = self._writer
            if writer.in_transaction:
                # Only a failed ROLLBACK gets here; never build on what it left behind.
                await rollback_quietly(writer)

            async def transaction(conn: aiosqlite.Connection) -> T:
                try:
                    await conn.execute("BEGIN IMMEDIATE")
                    result = await work(conn)
                    await conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        await rollback_quietly(conn)
                    raise
                return result

            def run(raw: sqlite3.Connection) -> T:
                # The whole transaction in one hop: its statements run at once on the
                # writer's thread (worker_thread.py), in the code PostgreSQL shares.
                return drive(transaction(cast(aiosqlite.Connection, DirectConnection(raw))))

            return await retrying(self.url, action, lambda: on_thread(writer, run))

    # -- the append transaction -------------------------------------------------------

    async def _index_for_search(self, session_id: str, segment_ids: Sequence[int]) -> None:
        """Index the messages of ``segment_ids`` the search index lacks (``SqliteReads``),
        in one ``BEGIN IMMEDIATE`` transaction: appends and other searches queue on it."""

        async def work(conn: aiosqlite.Connection) -> None:
            await index_pending_messages(conn, segment_ids)

        await self._write("index messages for search", work)

    async def _append_in(
        self,
        conn: aiosqlite.Connection,
        batch: Sequence[SessionEntry],
        encoded: Sequence[tuple[str, int]],
    ) -> None:
        session_id = batch[0].session_id
        # A chain of messages can break a rule only at its first entry, holds no memory
        # record, and places without lookups: its checks and placement skip the rest.
        chain = is_message_chain(batch)
        checked = batch[:1] if chain else batch
        state, parents = await state_and_parents(conn, session_id, outside_parent_ids(checked))
        root_id, last_session_seq, last_seq, last_segment = state
        failure = first_rule_failure(checked, root_id, parents, self.url)
        records: dict[str, MemoryRecord] = {}
        if not chain:
            # Entries before a rule failure are checked as memory records, as the
            # reference index does entry by entry; a record at the failing entry itself
            # comes second.
            limit = len(batch) if failure is None else failure[0]
            failure = (
                await first_memory_failure(conn, batch, limit, self._parse, records) or failure
            )
        if failure is not None:
            index, error = failure
            error.add_context(url=self.url)
            # An earlier (or the same) entry that already exists is reported first.
            raise await first_duplicate(conn, batch[: index + 1], self.url) or error
        placer = Placer(session_id, parents, last_seq, last_segment, self._estimator.name)
        rows: builtins.list[tuple[Any, ...]] = []
        with collector_paused():
            if chain:
                statements = insert_chain_statements(*placer.place_chain(batch, encoded))
            else:
                rows = [
                    placer.place(entry, body, tokens)
                    for entry, (body, tokens) in zip(batch, encoded, strict=True)
                ]
                statements = insert_entry_statements(rows)
        if root_id is None:
            await conn.execute(
                "INSERT INTO sessions (session_id, seq, root_id, leaf_id, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (session_id, last_session_seq + 1, batch[0].id, batch[-1].id, now_timestamp()),
            )
        else:
            await conn.execute(
                "UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (batch[-1].id, session_id)
            )
        if placer.segments:
            await conn.executemany(INSERT_SEGMENT_SQL, placer.segments)
        # Each new segment ends in a new leaf (its tail); continuing one moves its leaf.
        await conn.execute(
            ADD_TO_SUMMARY_SQL,
            (
                session_id,
                len(batch),
                len(batch) if chain else sum(1 for entry in batch if entry.kind == "message"),
                len(placer.segments),
                latest_timestamp(entry.timestamp for entry in batch),
            ),
        )
        try:
            for sql, values in statements:
                await conn.execute(sql, values)
        except sqlite3.IntegrityError:
            # Ids are checked by the UNIQUE index rather than a lookup per entry.
            duplicate = await first_duplicate(conn, batch, self.url, stored_up_to=last_seq)
            if duplicate is None:
                raise
            raise duplicate from None
        # Messages write no fold rows: only the other entries are placed for the folds.
        placed: builtins.list[PlacedEntry] = []
        if not chain:
            with collector_paused():
                placed = [
                    PlacedEntry(
                        entry, row[ROW_SEQ], row[ROW_SEGMENT], row[ROW_DEPTH], row[ROW_TOKENS]
                    )
                    for entry, row in zip(batch, rows, strict=True)
                    if entry.kind != "message"
                ]
        if placed:
            await write_memory_folds(conn, placed, records, batch)
        # A message's search rows are written by the first search that reaches it
        # (stores/sql/search_index.py), not here.
        # Last inside the transaction: a fault that raises rolls every row back.
        self._append_fault_point(batch)

    @property
    def _writer(self) -> aiosqlite.Connection:
        """The writer connection, made now if ``open`` left it for the first write."""
        if self._writer_conn is None:
            assert self._later is not None
            self._writer_conn, self._start_writer = self._later()
        return self._writer_conn

    @_writer.setter
    def _writer(self, conn: aiosqlite.Connection) -> None:
        self._writer_conn = conn

    # SqlReads types its reader as the SqlReader protocol, which aiosqlite's connection is;
    # mypy holds a property to the attribute's exact type.
    @property  # type: ignore[override]
    def _reader(self) -> aiosqlite.Connection:
        """The reader connection, made now if ``open`` left it for the first read."""
        if self._reader_conn is None:
            assert self._later_reader is not None
            self._reader_conn, self._start_reader = self._later_reader()
        return self._reader_conn

    @_reader.setter
    def _reader(self, conn: aiosqlite.Connection) -> None:
        self._reader_conn = conn

    async def _writer_started(self) -> None:
        """Open the writer if ``open`` left it for the first write (hold ``_lock``)."""
        self._writer  # noqa: B018 - made here, if not yet, so that it is started below
        start = self._start_writer
        if start is None:
            return
        try:
            await start()
        except BaseException:
            # The next write tries again, from a fresh connection.
            await close_quietly(self._writer)
            self._writer_conn = self._start_writer = None
            raise
        self._start_writer = None

    async def _started_reader(self) -> aiosqlite.Connection:
        """The reader, opened first if ``open`` left it for the first read that needs it."""
        reader = self._open_reader()
        if self._start_reader is None:
            return reader
        if self._reader_starting is None:
            # One opening for every read that arrives while it runs.
            starting = asyncio.ensure_future(self._open_later_reader())
            # Its failure is each waiting read's to report, not the loop's to log.
            starting.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._reader_starting = starting
        await asyncio.shield(self._reader_starting)
        return self._open_reader()

    async def _open_later_reader(self) -> None:
        start = self._start_reader
        assert start is not None
        try:
            await start()
        except BaseException:
            # The next read tries again, from a fresh connection.
            await close_quietly(self._reader)
            self._reader_conn = self._start_reader = None
            self._reader_starting = None
            raise
        self._start_reader = self._reader_starting = None

    def _open_writer(self) -> aiosqlite.Connection:
        self._check_open()
        if self._read_only:
            raise ReadOnlyStoreError(
                f"store {self.url!r} was opened read-only: open it without read_only to write",
                url=self.url,
            )
        if self._damaged is not None:
            raise CorruptStoreError(
                f"{self.url} is damaged ({self._damaged}); writes are refused so that "
                f"nothing more lands in a broken file: run 'prism-om check --db "
                f"{self._location}', then remove {self._location + DAMAGED_SUFFIX!r}",
                url=self.url,
            )
        return self._writer

    async def _writing(
        self, action: str, work: Callable[[aiosqlite.Connection], Awaitable[T]]
    ) -> T:
        """``_write``, marking the store damaged when the write meets a damaged file."""
        try:
            return await self._write(action, work)
        except CorruptStoreError as exc:
            self._mark_damaged(exc)
            raise
