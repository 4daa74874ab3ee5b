"""The SQL both engines run: SQLite as written, PostgreSQL through the transpiler.

``stores.sqlite`` and ``stores.postgres`` keep what is theirs (opening, connecting,
migrations, error translation, where a read runs); what they share is here, one module
per job:

- ``connection``: the typed connection the shared SQL runs on (``SqlReader``,
  ``SqlConnection``: ``execute_fetchall``, ``executemany``).
- ``reads``: every read of ``SessionStore`` (``SqlReads``), from the indexes and fold
  tables; an engine adds how a statement and a page run, and what damage leaves.
- ``damage``: the error of a fold row that no longer parses, and a cause's first line.
- ``statements``: the SQL text of the reads and writes, and the bindings of a branch read.
- ``placement``: placing a batch in the tree and checking it, inside the append.
- ``memory_folds``: the memory fold rows written at append and read back as a ledger.
- ``live_pool``: what each segment's tail keeps active (schema 4), kept at append.
- ``search_index``: the search index's rows, written and read (a message's postings
  packed in ``search_blocks``, a memory item's in ``search_terms``).
- ``recall_rows``: a recall's memory rows and the entries they cite, in one statement,
  and the ledger built from them.
"""
