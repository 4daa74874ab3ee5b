"""The SQLite adapter: session trees in one file, branch paths as indexed range queries.

Modules, one job each (what SQLite shares with PostgreSQL, the SQL text, placement, fold
rows, the live pool, the search index and recall's rows, is in ``stores.sql``):

- ``store``: ``SqliteStore``, opening a file and the write transactions over it.
- ``connect``: opening a file (pragmas, schema checks, ``MIGRATIONS``, the damage note).
- ``translate``: ``sqlite3`` errors turned into ``StoreError``s, written once.
- ``reads``: ``SqliteReads``, the shared reads (``stores.sql.reads``) with SQLite's busy
  retries, its page statement and the damage note.
- ``worker_thread``: a whole read or write transaction run on a connection's own worker
  thread, one thread hop per public call, through aiosqlite's public API (``docs/design.md``,
  "SQLite's thread work"); connections built so that their threads are daemons.
- ``thread_reads``: ``SqliteReads`` with each public read run that way.
- ``loop_reads``: bounded reads on the event loop's own read-only connection (no hop),
  kept per ``PRAGMA data_version``.
- ``loop_page``: the first rows of a page on that connection.
- ``page_statement``: a page of messages in one statement (the twin of PostgreSQL's).

Durability: the file runs in WAL mode. ``synchronous="NORMAL"`` (the default) keeps every
committed append through an application crash (a killed process); ``"FULL"`` also keeps
it through an operating-system crash or power loss, at the cost of an fsync per commit.

Concurrency: one writer connection, guarded by an ``asyncio.Lock`` held across each whole
transaction, because aiosqlite runs every coroutine's statements on one connection and so
in one transaction; every write transaction starts with ``BEGIN IMMEDIATE`` so that two
processes queue for the write lock instead of failing half-way. Reads use their own
connection and see the last committed state. A write lock held by another process past
``busy_timeout_ms`` is retried a few times with a short backoff, then raises
``StoreBusyError``. Every ``sqlite3`` error is translated at this boundary.

Branch paths: see ``schema.sql``. Each entry has a depth and a segment (a chain of first
children), so a branch is one (segment, depth range) piece per fork on it. The pieces come
from the small ``segments`` table by a recursive query; the entries of a piece come from
the ``(segment_id, depth)`` index. Nothing walks parent pointers one entry at a time.

Appends check everything ``MemoryStore`` checks, in the same order and with the same
errors, inside the write transaction: the tree rules, then ``om.*`` memory records with
the shared validation of ``core.validation``, reading only the entries a
record names and the memory records on its branch.

Opening a file that is already current (WAL, this schema version: the usual reopen) costs
three pragmas on the event loop's own read-only connection (``loop_reads``) and starts no
thread: the reader and the writer (aiosqlite, a thread each) open on the first read or
write that needs them, and ``close`` stops whichever did. ``leaf`` and ``recent_messages``
of a few run on that connection too, bounded (``thread_reads``). Any other file (new, older,
newer, foreign, or busy at that moment) takes the full open on the threads, which checks,
migrates or refuses it as before; the writer checks the file again when it starts.

Read-only opens (``read_only=True``) never create or change the file: the connection is
opened ``mode=ro``. A file in WAL mode needs its shared-memory file (``-shm``) for that;
where it cannot be created (a read-only directory) and no committed writes wait in the WAL,
the file is opened ``immutable=1`` instead, and such a reader does not see writes other
processes make while it is open.

Damage: a write that meets a corruption error marks the store damaged, in the process and
in a ``<file>-damaged`` note next to it, and every later write, in any process, refuses
with ``CorruptStoreError`` until the file is repaired (``prism-om check``) and the note
removed. Reads go on, so the readable sessions can be copied out.

Schema versions: a file of an older ``user_version`` is migrated in place, in one
transaction, when it is opened for writing (``MIGRATIONS``); a read-only open refuses it
as it is (``StoreVersionError``, saying how to migrate it), as the reads know only the
current shape. A newer version refuses to open.
"""

from __future__ import annotations

from .connect import DAMAGED_SUFFIX, MIGRATIONS
from .store import SqliteStore

__all__ = ["DAMAGED_SUFFIX", "MIGRATIONS", "SqliteStore"]
