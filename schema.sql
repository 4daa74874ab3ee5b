-- prism_om relational schema: the one source of truth for every SQL adapter.
--
-- Tables and indexes only. Pragmas are set in code, and tables derived from entries are
-- maintained by the adapter inside the append transaction, never by triggers, so that
-- sqlglot can transpile this file to other dialects (PostgreSQL) unchanged.
-- The SQLite adapter records the version of this file in PRAGMA user_version
-- (prism_om/stores/_schema.py: SCHEMA_VERSION); change both together.
-- REFERENCES clauses document the relations; the SQLite adapter keeps them itself and
-- leaves foreign-key enforcement off, which would cost a lookup per appended row.
-- INTEGER PRIMARY KEY columns are SQLite rowids; the adapter assigns their values itself,
-- so no dialect's auto-increment is relied on.
--
-- Branch paths without tree walks: every entry has a depth (root = 0) and a segment.
-- A segment is a maximal chain of entries each of which is the first child of the one
-- before. Appending to an entry that has no child yet continues its segment; appending to
-- an entry that already has a child starts a new segment whose parent segment is the
-- parent entry's segment. The path from the root to a leaf is then one depth range per
-- segment it crosses, and "rows on this branch" is an index range search per piece on
-- (segment_id, depth).

-- One row per session, in creation order (seq).
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    root_id TEXT NOT NULL,
    leaf_id TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE UNIQUE INDEX IF NOT EXISTS sessions_seq ON sessions (seq);

-- One row per segment; segment ids grow with creation, so a parent segment id is always
-- smaller than its children's. start_depth is the depth of the segment's first entry;
-- that entry's parent is in parent_segment_id at start_depth - 1.
CREATE TABLE IF NOT EXISTS segments (
    segment_id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (session_id),
    parent_segment_id INTEGER REFERENCES segments (segment_id),
    start_depth INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS segments_session ON segments (session_id, segment_id);

-- One row per entry, in append order (seq). The entry's envelope is in its columns (id,
-- session_id, parent_id, kind, timestamp; role and custom_type are copies of fields of its
-- payload) and body holds the rest as JSON, its payload: a message entry's message object,
-- a custom entry's data object, a compaction's {"summary", "data"} (schema version 4;
-- up to version 3 body held the whole wire JSON). data holds a message entry's data
-- object, the record a host keeps with the message, and is NULL on every other row
-- (added in schema version 7; custom_type then copies its type). The other columns are the entry's
-- place in the tree. tokens is the entry's estimate made at append with
-- token_encoding; path_tokens sums the message tokens from the root through this entry,
-- and is NULL when the path was counted with more than one encoding.
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL REFERENCES sessions (session_id),
    parent_id TEXT REFERENCES entries (id),
    kind TEXT NOT NULL,
    role TEXT,
    custom_type TEXT,
    timestamp TEXT NOT NULL,
    depth INTEGER NOT NULL,
    segment_id INTEGER NOT NULL REFERENCES segments (segment_id),
    tokens INTEGER NOT NULL,
    token_encoding TEXT NOT NULL,
    path_tokens INTEGER,
    body TEXT NOT NULL,
    data TEXT
);

CREATE INDEX IF NOT EXISTS entries_session_seq ON entries (session_id, seq);

-- A segment holds at most one entry per depth.
CREATE UNIQUE INDEX IF NOT EXISTS entries_segment_depth ON entries (segment_id, depth);


-- Observational-memory fold tables. Each row is keyed by the entry that recorded it
-- (entry_seq) and carries that entry's (segment_id, depth), so the memory of one branch
-- is an index range search per branch piece, exactly like the branch's entries. The
-- adapter fills them in the append transaction of the om.* entry itself.

-- One row per observation of an om.observations.recorded entry; body is its wire JSON.
CREATE TABLE IF NOT EXISTS om_observations (
    entry_seq INTEGER NOT NULL REFERENCES entries (seq),
    ordinal INTEGER NOT NULL,
    memory_id TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    segment_id INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    recorded_at TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (entry_seq, ordinal)
);

CREATE INDEX IF NOT EXISTS om_observations_branch ON om_observations (segment_id, depth);

CREATE INDEX IF NOT EXISTS om_observations_memory ON om_observations (memory_id);

-- The source entries of each observation, for "which memory rests on this entry".
CREATE TABLE IF NOT EXISTS om_observation_sources (
    entry_seq INTEGER NOT NULL REFERENCES entries (seq),
    ordinal INTEGER NOT NULL,
    source_entry_id TEXT NOT NULL,
    PRIMARY KEY (entry_seq, ordinal, source_entry_id)
);

CREATE INDEX IF NOT EXISTS om_observation_sources_source
    ON om_observation_sources (source_entry_id);

-- One row per reflection of an om.reflections.recorded entry; body is its wire JSON.
CREATE TABLE IF NOT EXISTS om_reflections (
    entry_seq INTEGER NOT NULL REFERENCES entries (seq),
    ordinal INTEGER NOT NULL,
    memory_id TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    segment_id INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    recorded_at TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (entry_seq, ordinal)
);

CREATE INDEX IF NOT EXISTS om_reflections_branch ON om_reflections (segment_id, depth);

CREATE INDEX IF NOT EXISTS om_reflections_memory ON om_reflections (memory_id);

-- One row per observation id an om.observations.dropped entry (or an om.folded
-- compaction's droppedObservationIds) retires.
CREATE TABLE IF NOT EXISTS om_drops (
    entry_seq INTEGER NOT NULL REFERENCES entries (seq),
    ordinal INTEGER NOT NULL,
    memory_id TEXT NOT NULL,
    segment_id INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    PRIMARY KEY (entry_seq, ordinal)
);

CREATE INDEX IF NOT EXISTS om_drops_branch ON om_drops (segment_id, depth);

-- One row per memory record (and om.folded compaction): its type and coverage cursor.
CREATE TABLE IF NOT EXISTS om_markers (
    entry_seq INTEGER PRIMARY KEY REFERENCES entries (seq),
    entry_id TEXT NOT NULL,
    record_type TEXT NOT NULL,
    covers_up_to_id TEXT,
    segment_id INTEGER NOT NULL,
    depth INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS om_markers_branch ON om_markers (segment_id, depth);

-- One row per om.scope.* record; the scope map of a branch folds these rows in order.
CREATE TABLE IF NOT EXISTS om_scope_records (
    entry_seq INTEGER PRIMARY KEY REFERENCES entries (seq),
    record_type TEXT NOT NULL,
    segment_id INTEGER NOT NULL,
    depth INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS om_scope_records_branch ON om_scope_records (segment_id, depth);

CREATE INDEX IF NOT EXISTS om_drops_memory ON om_drops (memory_id);

-- One row per reflection that a reflection of an om.reflections.recorded entry supersedes
-- (its supersedesReflectionIds): memory_id is the superseded reflection, superseded_by the
-- one that supersedes it. ordinal runs over the record's reflections and their lists, so
-- (depth, ordinal) is the fold's order. Added in schema version 3.
CREATE TABLE IF NOT EXISTS om_supersessions (
    entry_seq INTEGER NOT NULL REFERENCES entries (seq),
    ordinal INTEGER NOT NULL,
    memory_id TEXT NOT NULL,
    superseded_by TEXT NOT NULL,
    segment_id INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    PRIMARY KEY (entry_seq, ordinal)
);

CREATE INDEX IF NOT EXISTS om_supersessions_branch ON om_supersessions (segment_id, depth);

CREATE INDEX IF NOT EXISTS om_supersessions_memory ON om_supersessions (memory_id);

-- One row per session: what listing the sessions shows, so that listing them reads this
-- small table, not every entry. The adapter adds each appended batch to it in the append
-- transaction. leaves counts the session's segments (each segment's tail is exactly one
-- entry without children); last_activity is the latest entry timestamp as fixed-width UTC
-- ISO 8601 text, which sorts as the times it names.
CREATE TABLE IF NOT EXISTS session_summary (
    session_id TEXT PRIMARY KEY REFERENCES sessions (session_id),
    entries INTEGER NOT NULL,
    messages INTEGER NOT NULL,
    leaves INTEGER NOT NULL,
    last_activity TEXT
);

-- The live pool of each segment's tail (stores/sql/live_pool.py), so that a turn's
-- live ledger reads the active memory only: kind 0/1 a live observation/reflection
-- (item: its memory id; entry_seq, ordinal: its fold row), kind 2/3 the latest marker of
-- a record type / the latest with a coverage cursor (item: the type). Filled in the
-- append transaction of each memory record. Added in schema version 4.
CREATE TABLE IF NOT EXISTS om_live (
    segment_id INTEGER NOT NULL REFERENCES segments (segment_id),
    kind INTEGER NOT NULL,
    item TEXT NOT NULL,
    entry_seq INTEGER NOT NULL,
    ordinal INTEGER NOT NULL,
    PRIMARY KEY (segment_id, kind, item)
);

-- The search index (stores/sql/search_index.py): a posting is a distinct term key
-- (core/search_text.py: a 31-bit hash of a normalised term, never the term) of an
-- eligible message (kind 0), observation (1) or reflection (2), at the (segment_id,
-- depth) of the entry holding it; ordinal is the item's place in its record, as in the
-- fold tables. A search reads it by (term, branch piece). An observation's or a
-- reflection's postings are written in the append transaction of its record; a message's
-- by the first search that reaches it (search_indexed), so an append pays nothing for
-- them. Erased with the session. Added in schema version 5, a row per posting.
--
-- search_terms: a memory item's postings, a row each (the key is the whole row, so
-- SQLite keeps it as its own index: WITHOUT ROWID). Until version 8 it held the
-- messages' too (kind 0), which version 8 moved to search_blocks.
CREATE TABLE IF NOT EXISTS search_terms (
    term INTEGER NOT NULL,
    segment_id INTEGER NOT NULL REFERENCES segments (segment_id),
    depth INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    ordinal INTEGER NOT NULL,
    PRIMARY KEY (term, segment_id, depth, kind, ordinal)
) WITHOUT ROWID;

-- search_blocks: a message's postings packed, one row per (term, segment_id, block),
-- block being depth >> 8: postings holds the depth within the block of each message
-- holding the term, one byte each, in depth order; a write appends to it. A row per
-- posting cost 20-25 bytes of the file, a packed posting about one. Added in version 8.
CREATE TABLE IF NOT EXISTS search_blocks (
    term INTEGER NOT NULL,
    segment_id INTEGER NOT NULL REFERENCES segments (segment_id),
    block INTEGER NOT NULL,
    postings BLOB NOT NULL,
    PRIMARY KEY (term, segment_id, block)
) WITHOUT ROWID;

-- How far the search index holds each segment's messages: every eligible message of
-- segment_id at a depth <= depth has its postings in search_blocks. The first search whose branch
-- reaches past it indexes the rest of the segment (stores/sql/search_index.py), under the
-- writer's lock; erased with the session. Added in schema version 6.
CREATE TABLE IF NOT EXISTS search_indexed (
    segment_id INTEGER PRIMARY KEY REFERENCES segments (segment_id),
    depth INTEGER NOT NULL
);
