"""Opening a file: arguments, pragmas, schema checks, migrations, the damage note."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite

from ...core.timestamps import utc_timestamp
from ...errors import (
    CorruptStoreError,
    InvalidInputError,
    StoreError,
    StoreNotFoundError,
)
from .._rows import rewrite_bodies_as_payloads
from .._schema import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    Schema,
    newer_version,
    no_migration,
    older_read_only,
)
from ..sql.live_pool import backfill_live_pool
from ..sql.memory_folds import backfill_supersessions
from ..sql.search_index import (
    backfill_search_index,
    backfill_search_marks,
    pack_message_postings,
)
from ..sql.statements import MESSAGE_DATA_COLUMN_SQL, SUMMARIES_FROM_ENTRIES_SQL, fetch_first_row
from .loop_reads import NotAPoint, PointConnection
from .translate import close_quietly, primary_code, retrying, rollback_quietly, translate_error
from .worker_thread import ThreadWorkConnection, new_connection

SYNCHRONOUS_MODES = frozenset({"NORMAL", "FULL", "EXTRA"})


# The note a write that met a damaged file leaves next to it: "<file>-damaged".
DAMAGED_SUFFIX = "-damaged"
# A read-only open retries immutable=1 after these (no -shm file could be made).
_READ_ONLY_CODES = frozenset({sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN})


def read_damage_note(location: str) -> str | None:
    """The reason in the file's damage note, or None when there is none."""
    try:
        with open(location + DAMAGED_SUFFIX, "rb") as note:
            text = note.read(4096).decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        text = f"a damage note that cannot be read: {exc.strerror}"
    return f"marked damaged by an earlier write: {text or 'no reason recorded'}"


async def open_read_only(url: str, location: str, busy_timeout_ms: int) -> aiosqlite.Connection:
    """The one connection of a read-only store of a current file.

    A file of an older schema version is refused (``StoreVersionError``, naming the file,
    both versions and how to migrate it), unchanged: the reads know only the current
    shape, and a read-only open never migrates.
    """
    conn = await open_connection(url, location, busy_timeout_ms, uri_mode="ro")
    try:
        try:
            version, app_id = await _file_marks(conn)
        except sqlite3.Error as exc:
            if primary_code(exc) not in _READ_ONLY_CODES:
                raise translate_error(url, "open", exc) from exc
            await close_quietly(conn)
            conn = await _immutable_connection(url, location, busy_timeout_ms, exc)
            version, app_id = await retrying(url, "open", lambda: _file_marks(conn))
        if version == 0:
            # Read again with the tables in one snapshot: a writer creating the store may
            # have committed since (prepare_file, _FILE_STATE_SQL).
            version, app_id, tables = await retrying(
                url, "open", lambda: fetch_first_row(conn, _FILE_STATE_SQL)
            )
        if version == 0:
            if not tables:
                raise StoreNotFoundError(
                    f"no store at {location!r} ({url}): the file is empty, and a read "
                    "does not make a store of it",
                    url=url,
                )
            raise StoreError(
                f"{url} is not a prism_om store: it holds tables but no schema version", url=url
            )
        _check_marks(url, version, app_id)
        if version < SCHEMA_VERSION:
            how = (
                f"'prism-om migrate --db {location}', or SqliteStore.open({location!r}) or "
                f"open_store({url!r}) without read_only=True"
            )
            raise older_read_only(url, version, how)
    except BaseException:
        await close_quietly(conn)
        raise
    return conn


async def _immutable_connection(
    url: str, location: str, busy_timeout_ms: int, cause: sqlite3.Error
) -> aiosqlite.Connection:
    """A read-only connection that needs no ``-shm`` file: it ignores the WAL, so it is
    only taken when the WAL holds no committed writes."""
    wal = location + "-wal"
    with contextlib.suppress(OSError):
        if await asyncio.to_thread(os.path.getsize, wal) > 0:
            raise StoreError(
                f"{url}: committed writes still wait in {wal!r}, and a read-only "
                f"open cannot read them ({cause}): open the store once with write access "
                "in that directory, or copy the files somewhere writable",
                url=url,
            ) from cause
    return await open_connection(url, location, busy_timeout_ms, uri_mode="ro&immutable=1")


def check_open_args(location: str, busy_timeout_ms: int, synchronous: str) -> str:
    """Validate ``open``'s arguments; return the ``synchronous`` mode to set."""
    if not location or location == ":memory:" or location.startswith("file:"):
        raise InvalidInputError(
            f"sqlite store path {location!r}: name a file (use the memory: store for "
            "a store that lives in the process)"
        )
    if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
        raise InvalidInputError(f"busy_timeout_ms must be an int, got {busy_timeout_ms!r}")
    if busy_timeout_ms < 0:
        raise InvalidInputError(f"busy_timeout_ms must be >= 0, got {busy_timeout_ms}")
    mode = synchronous.upper() if isinstance(synchronous, str) else ""
    if mode not in SYNCHRONOUS_MODES:
        raise InvalidInputError(
            f"synchronous={synchronous!r}: use 'NORMAL' (survives an application crash) "
            "or 'FULL' (also survives power loss)"
        )
    return mode


async def open_connection(
    url: str,
    location: str,
    busy_timeout_ms: int,
    *,
    query_only: bool = False,
    uri_mode: str | None = None,
    probe: bool = True,
    then: Callable[[sqlite3.Connection], bool] | None = None,
) -> aiosqlite.Connection:
    """One connection in autocommit mode: transactions are begun explicitly.

    ``uri_mode`` opens the file as a URI with ``mode=<uri_mode>`` (``ro``, ``rw``, ...),
    which SQLite honours by never creating the file. The connection is set up in the
    hop that opens it; ``then(raw)`` runs there too (see ``open_writer``).
    """
    connection, _ = await _open(url, location, busy_timeout_ms, query_only, uri_mode, probe, then)
    return connection


def _ready_for_writes(mode: str) -> Callable[[sqlite3.Connection], bool]:
    """``then`` for a writer: is the file current, with ``synchronous`` set on the way."""

    def ready(raw: sqlite3.Connection) -> bool:
        if not file_is_current(raw):
            return False
        raw.execute(f"PRAGMA synchronous = {mode}")
        return True

    return ready


def file_is_current(raw: sqlite3.Connection) -> bool:
    """In WAL, stamped with this ``SCHEMA_VERSION`` and our application id: nothing to do."""
    return marks_are_current(lambda pragma: raw.execute(pragma).fetchall())


def marks_are_current(fetch: Callable[[str], list[Any]]) -> bool:
    """``file_is_current``, each pragma read by ``fetch``: three pragmas, as the table-valued
    ``pragma_*`` functions in one SELECT measured slower (a SELECT parses the schema)."""
    if str(fetch("PRAGMA journal_mode")[0][0]).lower() != "wal":
        return False
    (version,) = fetch("PRAGMA user_version")[0]
    (app_id,) = fetch("PRAGMA application_id")[0]
    return bool(version == SCHEMA_VERSION and app_id == APPLICATION_ID)


async def open_writer(
    url: str,
    location: str,
    busy_timeout_ms: int,
    mode: str,
    *,
    uri_mode: str | None,
    probe: bool = True,
) -> tuple[aiosqlite.Connection, bool]:
    """The writer connection, and whether the file is already ready for it.

    A file already current (``file_is_current``) needs nothing more than ``synchronous``:
    that is checked and set in the hop that opens the connection, and ``prepare_file``
    is skipped. Anything else (a new, older or foreign file, or any error on the way)
    answers False, and ``prepare_file`` does the full work, with its retries and errors.
    """
    ready = _ready_for_writes(mode)
    return await _open(url, location, busy_timeout_ms, False, uri_mode, probe, ready)


def later_writer(
    url: str, location: str, busy_timeout_ms: int, mode: str, *, uri_mode: str | None
) -> tuple[aiosqlite.Connection, Callable[[], Awaitable[bool]]]:
    """A writer connection not opened yet, and how to open it: ``await start()`` opens
    it (no probe: the reader has opened the file) and answers as ``open_writer`` does."""
    target = location if uri_mode is None else _file_uri(location, uri_mode)
    return _unstarted(url, target, busy_timeout_ms, False, uri_mode, _ready_for_writes(mode))


def later_reader(
    url: str, location: str, busy_timeout_ms: int, *, uri_mode: str | None
) -> tuple[aiosqlite.Connection, Callable[[], Awaitable[bool]]]:
    """The reader connection (``query_only``) not opened yet, and how to open it, for a
    file already checked current: ``await start()`` opens it, with no probe or checks."""
    target = location if uri_mode is None else _file_uri(location, uri_mode)
    return _unstarted(url, target, busy_timeout_ms, True, uri_mode, None)


def current_on_loop(point: PointConnection) -> bool:
    """Whether the file is current (``file_is_current``), asked on the loop's own read-only
    connection: three pragmas that never wait. False for anything else, busy or
    failing included, which the full open then checks and reports on its threads."""
    if point.get() is None:
        return False
    try:
        return marks_are_current(lambda pragma: point.fetch(pragma, ()))
    except (NotAPoint, IndexError):
        return False


async def open_reader(
    url: str, location: str, busy_timeout_ms: int, *, uri_mode: str | None
) -> tuple[aiosqlite.Connection, bool]:
    """The reader connection (``query_only``), and whether the file is current."""
    return await _open(url, location, busy_timeout_ms, True, uri_mode, True, file_is_current)


async def _open(
    url: str,
    location: str,
    busy_timeout_ms: int,
    query_only: bool,
    uri_mode: str | None,
    probe: bool,
    then: Callable[[sqlite3.Connection], bool] | None,
) -> tuple[aiosqlite.Connection, bool]:
    target = location if uri_mode is None else _file_uri(location, uri_mode)
    if probe:
        # aiosqlite leaves its worker thread to finish stopping after a failed connect,
        # which can outlive the event loop; a plain probe reports an unopenable path first.
        # It runs here, not in a worker thread: sqlite3.connect reads no page (a bounded
        # open of the file, ~50 us), where the hop to a thread and back costs more.
        try:
            _probe(target, uri_mode is not None)
        except sqlite3.Error as exc:
            raise translate_error(url, "open", exc) from exc
    conn, start = _unstarted(url, target, busy_timeout_ms, query_only, uri_mode, then)
    return conn, await start()


def _unstarted(
    url: str,
    target: str,
    busy_timeout_ms: int,
    query_only: bool,
    uri_mode: str | None,
    then: Callable[[sqlite3.Connection], bool] | None,
) -> tuple[aiosqlite.Connection, Callable[[], Awaitable[bool]]]:
    failures: list[sqlite3.Error] = []
    answer = [False]

    def connector() -> sqlite3.Connection:
        # Runs on the connection's thread: everything a new connection needs, one hop.
        raw = sqlite3.connect(
            target,
            isolation_level=None,
            uri=uri_mode is not None,
            factory=ThreadWorkConnection,
        )
        try:
            # busy_timeout first, so that everything after it waits for a busy file.
            raw.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if query_only:
                raw.execute("PRAGMA query_only = ON")
            # Migrations compare timestamps as times (the session_summary backfill).
            raw.create_function("prism_utc", 1, utc_timestamp, deterministic=True)
        except sqlite3.Error as exc:
            # Reported once connected: a connector that raises leaves aiosqlite's thread
            # stopping after the caller has moved on (see the probe in _open).
            failures.append(exc)
            return raw
        if then is not None:
            with contextlib.suppress(sqlite3.Error):
                answer[0] = then(raw)
        return raw

    # Built where its worker thread becomes a daemon (worker_thread.new_connection).
    conn = new_connection(connector)

    async def start() -> bool:
        try:
            await conn
        except sqlite3.Error as exc:
            raise translate_error(url, "open", exc) from exc
        if failures:
            await close_quietly(conn)
            raise translate_error(url, "open", failures[0]) from failures[0]
        return answer[0]

    return conn, start


def _probe(target: str, uri: bool) -> None:
    sqlite3.connect(target, uri=uri).close()


def _file_uri(location: str, mode: str) -> str:
    # as_uri percent-encodes, so a path holding '?' or '#' stays a path.
    return f"{Path(location).absolute().as_uri()}?mode={mode}"


async def prepare_file(
    url: str, conn: aiosqlite.Connection, mode: str, schema: Schema, *, create: bool = True
) -> None:
    """Check the file is a prism_om store (or an empty file), then switch to WAL, set
    ``synchronous``, and apply, migrate or check the schema.

    Another program's SQLite file is refused before anything is written to it: switching
    it to WAL alone would rewrite its header.
    """
    # One statement, so one snapshot: read apart, another process's schema creation (its
    # tables and version stamp in one commit) could land between them, and the file would
    # read as tables without a version, a foreign file (seen with two processes opening a
    # new file at once).
    version, app_id, tables = await retrying(
        url, "open", lambda: fetch_first_row(conn, _FILE_STATE_SQL)
    )
    if not create and version == 0 and not tables:
        # An empty file reads as a database of version 0; without create it stays empty.
        location = url.removeprefix("sqlite:")
        raise StoreNotFoundError(
            f"no store at {location!r} ({url}): the file is empty, and this open may "
            "not create a store",
            url=url,
        )
    if version != 0:
        _check_marks(url, version, app_id)
    elif tables:
        raise StoreError(
            f"{url} is not a prism_om store: it holds tables but no schema version", url=url
        )
    elif app_id not in (0, APPLICATION_ID):
        _check_marks(url, version, app_id)  # another program's mark on an empty file

    async def set_wal() -> None:
        rows = builtins.list(await conn.execute_fetchall("PRAGMA journal_mode = WAL"))
        if not rows or str(rows[0][0]).lower() != "wal":
            raise StoreError(f"{url}: could not switch the file to WAL mode", url=url)

    await retrying(url, "open", set_wal)
    await retrying(url, "open", lambda: conn.execute(f"PRAGMA synchronous = {mode}"))
    version, app_id = await retrying(url, "open", lambda: _file_marks(conn))
    if version == 0:
        await retrying(url, "open", lambda: _apply_schema(url, conn, schema))
    else:
        _check_marks(url, version, app_id)
        if version < SCHEMA_VERSION:
            await retrying(url, "migrate", lambda: _migrate(url, conn, schema))


# The file's (user_version, application_id, tables) in one statement (prepare_file).
_FILE_STATE_SQL = (
    "SELECT (SELECT user_version FROM pragma_user_version),"
    " (SELECT application_id FROM pragma_application_id),"
    " (SELECT count(*) FROM sqlite_master)"
)


async def _file_marks(conn: aiosqlite.Connection) -> tuple[int, int]:
    """The file's ``(user_version, application_id)``."""
    version = (await fetch_first_row(conn, "PRAGMA user_version"))[0]
    app_id = (await fetch_first_row(conn, "PRAGMA application_id"))[0]
    return int(version), int(app_id)


def _check_marks(url: str, version: int, app_id: int) -> None:
    if version < 0:
        raise CorruptStoreError(f"{url}: the file header holds schema version {version}", url=url)
    if app_id != APPLICATION_ID:
        raise StoreError(
            f"{url} is not a prism_om store (application_id {app_id:#x}, "
            f"expected {APPLICATION_ID:#x})",
            url=url,
        )
    if version > SCHEMA_VERSION:
        raise newer_version(url, version)
    if version < SCHEMA_VERSION and any(
        v not in MIGRATIONS for v in range(version, SCHEMA_VERSION)
    ):
        raise no_migration(url, version)


async def _apply_schema(url: str, conn: aiosqlite.Connection, schema: Schema) -> None:
    """Create the tables of a fresh file in one transaction, then stamp its version."""
    await conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have created the schema while this one waited for the lock.
        version, app_id = await _file_marks(conn)
        if version != 0:
            _check_marks(url, version, app_id)
        else:
            (tables,) = await fetch_first_row(conn, "SELECT count(*) FROM sqlite_master")
            if tables:
                raise StoreError(
                    f"{url} is not a prism_om store: it holds tables but no schema version", url=url
                )
            for statement in schema.statements:
                await conn.execute(statement)
            await conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            await conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        await conn.execute("COMMIT")
    except BaseException:
        await rollback_quietly(conn)
        raise


async def _backfill_session_summary(conn: aiosqlite.Connection) -> None:
    """Version 1 to 2: the session_summary table, filled from the entries."""
    columns = "session_id, entries, messages, leaves, last_activity"
    await conn.execute(
        f"INSERT INTO session_summary ({columns}) "
        f"SELECT {columns} FROM ({SUMMARIES_FROM_ENTRIES_SQL})"
    )


async def _backfill_supersessions(conn: aiosqlite.Connection) -> None:
    """Version 2 to 3: the om_supersessions fold table, filled from the reflection records."""
    await backfill_supersessions(conn)


async def _v4_live_pool(conn: aiosqlite.Connection) -> None:
    """Version 3 to 4: the om_live pool of every segment's tail, from the fold tables."""
    await backfill_live_pool(conn)


async def _v4_row_shape(conn: aiosqlite.Connection) -> None:
    """Version 3 to 4: entry bodies hold the payload only, the envelope stays in its
    columns (``stores/_rows.py``)."""
    await rewrite_bodies_as_payloads(conn)


async def _v4(conn: aiosqlite.Connection) -> None:
    """Version 3 to 4: both changes of that version, in the one transaction. The bodies
    are rewritten first; the live pool is built from the fold tables alone."""
    await _v4_row_shape(conn)
    await _v4_live_pool(conn)


async def _v5_search_index(conn: aiosqlite.Connection) -> None:
    """Version 4 to 5: the search_terms index, filled from the entries and fold rows."""
    await backfill_search_index(conn)


async def _v6_search_marks(conn: aiosqlite.Connection) -> None:
    """Version 5 to 6: every segment marked indexed to its last entry (search_indexed):
    version 5 indexed each message in its append."""
    await backfill_search_marks(conn)


async def _v7_message_data(conn: aiosqlite.Connection) -> None:
    """Version 6 to 7: the entries.data column of a message entry's data (NULL on every
    row so far: no entry of an older version carries any). SQLite adds a nullable column
    in the schema alone, without rewriting a row. (A step run again on a file whose
    version stamp lags its tables finds the column there.)"""
    columns = await conn.execute_fetchall("SELECT name FROM pragma_table_info('entries')")
    if all(name != "data" for (name,) in columns):
        await conn.execute(MESSAGE_DATA_COLUMN_SQL)


async def _v8_packed_search(conn: aiosqlite.Connection) -> None:
    """Version 7 to 8: the messages' postings packed into search_blocks
    (``search_index.pack_message_postings``); a memory item's stay in search_terms."""
    await pack_message_postings(conn)


# Migration steps, keyed by the version they start from. Each runs inside the one
# transaction of _migrate, after every CREATE ... IF NOT EXISTS of schema.sql has made the
# new tables and indexes; it fills them from the entries.
MIGRATIONS: dict[int, Callable[[aiosqlite.Connection], Awaitable[None]]] = {
    1: _backfill_session_summary,
    2: _backfill_supersessions,
    3: _v4,
    4: _v5_search_index,
    5: _v6_search_marks,
    6: _v7_message_data,
    7: _v8_packed_search,
}


async def _migrate(url: str, conn: aiosqlite.Connection, schema: Schema) -> None:
    """Bring an older file to ``SCHEMA_VERSION`` in one transaction: all steps or none."""
    await conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated the file while this one waited for the lock.
        version, app_id = await _file_marks(conn)
        _check_marks(url, version, app_id)
        if version < SCHEMA_VERSION:
            for statement in schema.statements:
                await conn.execute(statement)
            for step in range(version, SCHEMA_VERSION):
                try:
                    await MIGRATIONS[step](conn)
                except CorruptStoreError as exc:
                    # A step knows the connection, not the file: name it here.
                    raise CorruptStoreError(f"{url}: {exc}", url=url).add_context(
                        entry_id=exc.entry_id
                    ) from exc
            await conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        await conn.execute("COMMIT")
    except BaseException:
        await rollback_quietly(conn)
        raise
