"""The PostgreSQL adapter: the SQLite adapter's tables, queries and rules on a server.

Needs the optional extra ``prism-om[postgres]`` (psycopg 3 and psycopg_pool). Open it
with ``open_store("postgresql://user@host:port/db?schema=name")`` (``postgres://`` too);
``schema`` (or ``search_path``) keeps several projects apart in one database (default
``public``), and is created on first use.

One source, two engines: the tables are ``schema.sql`` and the queries are those of
``stores/sql``, both transpiled by sqlglot (``dialect``), with the few differences
listed there. Reads, placement, fold rows and every rule check are the SQLite adapter's
own code, run over a psycopg connection that speaks its SQL (``connection``).

What differs from SQLite:

- Counters (``sessions.seq``, ``entries.seq``, ``segments.segment_id``) are identity
  columns; a batch draws its ids from their sequences instead of ``max()+1``.
- Writers of one session queue on a transaction-scoped advisory lock on the session id,
  taken first in every append and checkout, so ``append_at_leaf`` reads the leaf and
  appends under it with no other writer in between, on any host; writers of other
  sessions proceed in parallel. A write that has begun completes even when its caller is
  cancelled, as on every adapter.
- The schema version lives in a ``prism_meta`` table (there is no ``user_version``);
  an older version is migrated when opened for writing (``MIGRATIONS``) and refused
  read-only (``StoreVersionError``, saying how to migrate it), a newer one refuses to open.
- Damage is the server's to report: a ``CorruptStoreError`` from it makes this store
  object refuse later writes; there is no ``-damaged`` note (no local file).
- A server store exists once its tables do: ``create=False`` and ``read_only=True``
  refuse a schema without them and never create it. Read-only connections are also
  read-only on the server.
- Every driver and pool error is translated into ``StoreError`` and its subclasses
  (``connection.translate_pg_error``). The open makes its first connection itself
  (``connect``): what waiting cannot fix (an unknown database or role, authentication)
  raises ``StoreUnreachableError`` at once, a refusal a restart explains is retried for
  ``connect_timeout_s`` (3 s by default). Waiting for a connection, and for a lock on the server
  (``lock_timeout``), is bounded by ``timeout_s`` (30 s) and then raises
  ``StoreBusyError`` (``StoreUnreachableError`` when a direct attempt finds the server
  refusing connections: ``connect.pool_timeout_error``); so is a bounded read the server
  does not answer (a frozen server or network), cancelled at ``timeout_s`` + 1 s
  (``connection.BOUNDED_READS``): the error arrives then, or up to 5 s later when the
  server does not answer the cancel either (psycopg waits that long, then closes the
  connection).
- Round trips cost more than statements: a page and a recall's memory rows (with the
  sources they cite) are one PostgreSQL-only statement each (``reads``); reads run on a
  connection the reader keeps while no other read uses it (the pool holds
  ``pool_size + 1``); an append sends its writes in one pipeline.
"""

from __future__ import annotations

from .store import MIGRATIONS, PostgresStore, split_postgres_url

__all__ = ["MIGRATIONS", "PostgresStore", "split_postgres_url"]
