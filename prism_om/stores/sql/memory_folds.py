"""Observational-memory fold tables of the SQLite adapter: rows written, ledger read.

Appending an ``om.*`` entry (or an ``om.folded`` compaction) writes one row per recorded
observation, source, reflection and drop, plus a marker row with the record's type and
coverage cursor, in the append transaction itself. Every row carries the recording
entry's ``(segment_id, depth)``, so a branch's ledger is an index range search per branch
piece, and rebuilding it in branch order (depth, then position in the record) gives
exactly what ``fold_observational_memory_ledger`` gives for the same branch, because the
shared validation refuses every record the fold would ignore.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from ...core.ledger import (
    Coverage,
    ObservationalMemoryLedger,
    RecordedObservation,
    RecordedReflection,
    Supersession,
)
from ...core.parse import MemoryRecord, parse_memory_record
from ...core.records import (
    FOLDED_TYPE,
    OBSERVATIONS_DROPPED,
    OBSERVATIONS_RECORDED,
    REFLECTIONS_RECORDED,
    FoldedMemory,
    Observation,
    ObservationsDropped,
    ObservationsRecorded,
    Reflection,
    ReflectionsRecorded,
    dated_observation,
)
from ...entries import SessionEntry
from .._rows import entry_columns, stored_entry
from .connection import SqlConnection
from .live_pool import follow_appends
from .placement import PlacedEntry
from .search_index import memory_search_rows, write_search_rows
from .statements import COMPACTION_MARKER

# Fold rows as the ledger queries of ``statements.ledger_queries`` select them (sqlite3 rows are
# untyped tuples; these name what each column holds).
# (depth, ordinal, memory_id, entry_id, recorded_at, body)
MemoryRow = tuple[int, int, str, str, str, str | bytes]
# (depth, ordinal, memory_id)
DropRow = tuple[int, int, str]
# (depth, entry_id, record_type, covers_up_to_id)
MarkerRow = tuple[int, str, str, str | None]
# (depth, ordinal, memory_id, superseded_by)
SupersessionRow = tuple[int, int, str, str]


@dataclass
class FoldRows:
    """Rows for each fold table, as built from one appended batch."""

    observations: list[tuple[Any, ...]] = field(default_factory=list)
    sources: list[tuple[Any, ...]] = field(default_factory=list)
    reflections: list[tuple[Any, ...]] = field(default_factory=list)
    drops: list[tuple[Any, ...]] = field(default_factory=list)
    markers: list[tuple[Any, ...]] = field(default_factory=list)
    scope_records: list[tuple[Any, ...]] = field(default_factory=list)
    supersessions: list[tuple[Any, ...]] = field(default_factory=list)


def undated_sources(placed: Sequence[PlacedEntry]) -> set[str]:
    """Source entry ids of the batch's observations recorded without ``observedAt``."""
    wanted: set[str] = set()
    for item in placed:
        entry = item.entry
        if entry.custom_type != OBSERVATIONS_RECORDED or entry.data is None:
            continue
        # Read the validated payload as stored: parsing it again would cost every append.
        for obs in entry.data.get("observations") or ():
            if obs.get("observedAt") is None:
                wanted.update(obs["sourceEntryIds"])
    return wanted


def fold_rows(
    placed: Sequence[PlacedEntry],
    source_times: Mapping[str, str] | None = None,
    records: Mapping[str, MemoryRecord] | None = None,
) -> FoldRows:
    """The fold-table rows of a placed batch (``PlacedEntry`` items); cheap for messages.

    ``source_times`` holds the timestamps of ``undated_sources(placed)``: an observation
    row is stored already dated, exactly as the pure fold dates it. ``records`` holds the
    memory records validation already parsed, by entry id (``first_memory_failure``).
    """
    times = dict(source_times or {})
    rows = FoldRows()
    for item in placed:
        entry = item.entry
        if entry.kind == "message":
            continue
        marker = entry.custom_type
        if marker is not None and marker.startswith("om.scope."):
            rows.scope_records.append((item.seq, marker, item.segment_id, item.depth))
            continue
        record = (
            records[entry.id]
            if records is not None and entry.id in records
            else parse_memory_record(entry)
        )
        where = (item.segment_id, item.depth)
        if record is None:
            if entry.kind == "compaction":
                # Any compaction is a marker, so "the latest compaction" is an indexed read.
                rows.markers.append((item.seq, entry.id, COMPACTION_MARKER, None, *where))
            continue
        if isinstance(record, ObservationsRecorded):
            for n, payload in enumerate(record.observations):
                obs = dated_observation(payload, times.get, entry.timestamp)
                body = obs.model_dump_json(by_alias=True)
                rows.observations.append(
                    (item.seq, n, obs.id, entry.id, *where, entry.timestamp, body)
                )
                rows.sources.extend((item.seq, n, s) for s in obs.source_entry_ids)
        elif isinstance(record, ReflectionsRecorded):
            for n, refl in enumerate(record.reflections):
                body = refl.model_dump_json(by_alias=True)
                rows.reflections.append(
                    (item.seq, n, refl.id, entry.id, *where, entry.timestamp, body)
                )
            rows.supersessions.extend(supersession_rows(record, item.seq, *where))
        elif isinstance(record, ObservationsDropped | FoldedMemory):
            ids = (
                record.observation_ids
                if isinstance(record, ObservationsDropped)
                else record.dropped_observation_ids
            )
            rows.drops.extend((item.seq, n, memory_id, *where) for n, memory_id in enumerate(ids))
        record_type = FOLDED_TYPE if isinstance(record, FoldedMemory) else record.type
        covers = None if isinstance(record, FoldedMemory) else record.covers_up_to_id
        rows.markers.append((item.seq, entry.id, record_type, covers, *where))
    return rows


_INSERTS = {
    "observations": "INSERT INTO om_observations (entry_seq, ordinal, memory_id, entry_id, "
    "segment_id, depth, recorded_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "sources": "INSERT OR IGNORE INTO om_observation_sources (entry_seq, ordinal, "
    "source_entry_id) VALUES (?, ?, ?)",
    "reflections": "INSERT INTO om_reflections (entry_seq, ordinal, memory_id, entry_id, "
    "segment_id, depth, recorded_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "drops": "INSERT INTO om_drops (entry_seq, ordinal, memory_id, segment_id, depth) "
    "VALUES (?, ?, ?, ?, ?)",
    "markers": "INSERT INTO om_markers (entry_seq, entry_id, record_type, covers_up_to_id, "
    "segment_id, depth) VALUES (?, ?, ?, ?, ?, ?)",
    "scope_records": "INSERT INTO om_scope_records (entry_seq, record_type, segment_id, depth) "
    "VALUES (?, ?, ?, ?)",
    "supersessions": "INSERT INTO om_supersessions (entry_seq, ordinal, memory_id, "
    "superseded_by, segment_id, depth) VALUES (?, ?, ?, ?, ?, ?)",
}


def supersession_rows(
    record: ReflectionsRecorded, seq: int, segment_id: int, depth: int
) -> list[tuple[Any, ...]]:
    """``om_supersessions`` rows of one reflections record, in the fold's order."""
    pairs = [(old, r.id) for r in record.reflections for old in r.supersedes_reflection_ids or ()]
    return [(seq, n, old, by, segment_id, depth) for n, (old, by) in enumerate(pairs)]


async def backfill_supersessions(conn: SqlConnection) -> None:
    """Fill ``om_supersessions`` from the stored reflection records (the migration to the
    schema version that added it). ``conn`` is the migrating connection: aiosqlite's, or
    the PostgreSQL adapter's, which speaks the same SQL through the transpiler."""
    sql = (
        f"SELECT seq, segment_id, depth, {entry_columns(data=False)} FROM entries "
        "WHERE custom_type = ? ORDER BY seq"
    )
    rows: list[tuple[Any, ...]] = []
    for seq, segment_id, depth, *row in await conn.execute_fetchall(sql, (REFLECTIONS_RECORDED,)):
        # Either row shape: a later step of the same migration rewrites the bodies.
        entry, _ = stored_entry(row)
        record = parse_memory_record(entry)
        if isinstance(record, ReflectionsRecorded):
            rows.extend(supersession_rows(record, seq, segment_id, depth))
    if rows:
        await conn.executemany(_INSERTS["supersessions"], rows)


async def write_fold_rows(conn: SqlConnection, rows: FoldRows) -> None:
    """Insert the rows on the writer connection, inside the append transaction."""
    for name, sql in _INSERTS.items():
        values = getattr(rows, name)
        if values:
            await conn.executemany(sql, values)


_M = TypeVar("_M", bound=BaseModel)
_LIST_ADAPTERS: dict[type[BaseModel], TypeAdapter[Any]] = {
    Observation: TypeAdapter(list[Observation]),
    Reflection: TypeAdapter(list[Reflection]),
}


def parse_bodies(model: type[_M], bodies: Sequence[Any]) -> list[_M]:
    """``model.model_validate_json`` of each fold-row body, validated in one pydantic-core
    call over the bodies joined as one JSON array (each body pays no call of its own).

    Every body is still validated: a row damaged outside the API fails here. A body that
    is not one JSON value by itself could only change the array's length (or break it):
    then, or on any error, the bodies are validated one by one, so the error is the one
    that body alone raises.
    """
    if not bodies:
        return []
    if all(type(body) is str for body in bodies):
        try:
            parsed: list[_M] = _LIST_ADAPTERS[model].validate_json("[" + ",".join(bodies) + "]")
        except ValidationError:
            pass
        else:
            if len(parsed) == len(bodies):
                return parsed
    return [model.model_validate_json(body) for body in bodies]


def ledger_from_rows(
    observations: Sequence[MemoryRow],
    reflections: Sequence[MemoryRow],
    drops: Sequence[DropRow],
    markers: Sequence[MarkerRow],
    supersessions: Sequence[SupersessionRow] = (),
) -> ObservationalMemoryLedger:
    """Rebuild the ledger from fold rows read in branch order (see the module docstring)."""
    # Observations and reflections share one id namespace; the first record of an id wins.
    items = sorted(
        [(d, n, 0, mid, eid, at, body) for d, n, mid, eid, at, body in observations]
        + [(d, n, 1, mid, eid, at, body) for d, n, mid, eid, at, body in reflections]
    )
    seen: set[str] = set()
    obs_rows: list[tuple[str, str, int]] = []
    obs_bodies: list[Any] = []
    refl_rows: list[tuple[str, str, int]] = []
    refl_bodies: list[Any] = []
    observation_depth: dict[str, int] = {}
    for depth, _, kind, memory_id, entry_id, at, body in items:
        if memory_id in seen:
            continue
        seen.add(memory_id)
        if kind == 0:
            obs_rows.append((entry_id, at, depth))
            obs_bodies.append(body)
            observation_depth[memory_id] = depth
        else:
            refl_rows.append((entry_id, at, depth))
            refl_bodies.append(body)
    recorded_obs = [
        RecordedObservation(obs, *row)
        for obs, row in zip(parse_bodies(Observation, obs_bodies), obs_rows, strict=True)
    ]
    recorded_refl = [
        RecordedReflection(refl, *row)
        for refl, row in zip(parse_bodies(Reflection, refl_bodies), refl_rows, strict=True)
    ]
    dropped: dict[str, None] = {}
    for depth, _, memory_id in drops:
        recorded = observation_depth.get(memory_id)
        if recorded is not None and recorded < depth:
            dropped.setdefault(memory_id, None)
    # Validation let only first supersessions of reflections on the branch in; the first
    # row of an id in branch order is the one the fold keeps.
    reflection_ids = {r.id for r in recorded_refl}
    superseded: dict[str, Supersession] = {}
    for _, _, memory_id, by in sorted(supersessions):
        if memory_id in reflection_ids and memory_id not in superseded:
            superseded[memory_id] = Supersession(memory_id, by)
    coverage: dict[str, Coverage] = {}
    last: dict[str, str] = {}
    for depth, entry_id, record_type, covers in markers:
        last[record_type] = entry_id
        if covers is not None:
            coverage[record_type] = Coverage(covers, entry_id, depth)
    return ObservationalMemoryLedger(
        observations=tuple(recorded_obs),
        reflections=tuple(recorded_refl),
        dropped_observation_ids=tuple(dropped),
        observation_coverage=coverage.get(OBSERVATIONS_RECORDED),
        reflection_coverage=coverage.get(REFLECTIONS_RECORDED),
        drop_coverage=coverage.get(OBSERVATIONS_DROPPED),
        last_observations_entry_id=last.get(OBSERVATIONS_RECORDED),
        last_reflections_entry_id=last.get(REFLECTIONS_RECORDED),
        supersessions=tuple(superseded.values()),
    )


async def write_memory_folds(
    conn: SqlConnection,
    placed: Sequence[PlacedEntry],
    records: Mapping[str, MemoryRecord] | None = None,
    batch: Sequence[SessionEntry] | None = None,
) -> None:
    """Keep the memory fold tables in step with the entries, inside the append.

    ``placed`` may leave the batch's messages out (they write no fold rows) when
    ``batch`` is the whole appended batch; ``records`` as for ``fold_rows``.
    """
    times: dict[str, str] = {}
    wanted = undated_sources(placed)
    if wanted:
        # Observations written without observedAt (the TypeScript shape) are dated by
        # their newest source, which validation has already found on the branch.
        appended = batch if batch is not None else [p.entry for p in placed]
        times = {e.id: e.timestamp for e in appended if e.id in wanted}
        rest = sorted(wanted - times.keys())
        if rest:
            marks = ", ".join("?" * len(rest))
            sql = f"SELECT id, timestamp FROM entries WHERE id IN ({marks})"
            times.update({row[0]: row[1] for row in await conn.execute_fetchall(sql, rest)})
    rows = fold_rows(placed, times, records)
    await write_fold_rows(conn, rows)
    await follow_appends(conn, placed, rows)
    await write_search_rows(conn, memory_search_rows(rows))
