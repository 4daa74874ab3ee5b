"""This package's own session files: one ``SessionEntry`` wire dict per line.

Each entry is re-keyed into the new session: a new deterministic id, its parent's new id,
the same kind, timestamp and payload. The file must hold one session's tree: one root, and
every parent earlier in the file (the JSONL adapter writes in append order).

Memory records are not carried over as memory. An ``om.*`` custom entry's observations,
``sourceEntryIds`` and ``coversUpToId`` point at the origin session, and its 12-hex memory
ids are already used there; replayed here they would dangle or clash. So it becomes a custom
``{"type": "import.om-record", "originalType": <om type>, "record": <original data>}``:
nothing is dropped, and the new session's memory is built afresh by its own workers. For
the same reason a compaction's folded memory (``data.memory``) moves to
``data.importedMemory``. Entry ids a compaction names for context building
(``throughEntryId``, ``keepEntryIds``, ``firstKeptEntryId``) and the ``importRefs`` of
earlier imports are rewritten to the new ids, since they point inside this same file.
"""

from __future__ import annotations

from typing import Any

from ..entries import SessionEntry, entry_from_wire
from ..errors import InvalidEntryError
from .build import EntryFactory
from .source import Source

__all__ = ["NATIVE_KINDS", "OM_RECORD_TYPE", "looks_native", "parse_native"]

NATIVE_KINDS = frozenset({"message", "custom", "compaction"})
OM_RECORD_TYPE = "import.om-record"
_SINGLE_REFS = ("throughEntryId", "firstKeptEntryId")
_LIST_REFS = ("keepEntryIds",)


def looks_native(data: dict[str, Any]) -> bool:
    """True for a record shaped like a ``SessionEntry`` wire dict."""
    return (
        isinstance(data.get("id"), str)
        and isinstance(data.get("sessionId"), str)
        and data.get("kind") in NATIVE_KINDS
    )


def parse_native(source: Source, factory: EntryFactory) -> list[SessionEntry]:
    """Re-key every entry of one session's JSONL file into the import's session."""
    new_ids: dict[str, str] = {}
    first_pos: dict[str, int] = {}
    origin: tuple[str, int] | None = None
    root_pos: int | None = None
    entries: list[SessionEntry] = []
    for record in source.records:
        pos = record.pos
        try:
            old = entry_from_wire(record.data)
        except InvalidEntryError as exc:
            raise source.error(pos, str(exc)) from None
        if origin is None:
            origin = (old.session_id, pos)
        elif old.session_id != origin[0]:
            raise source.error(
                pos,
                f"entry of session {old.session_id!r}, but {source.where(origin[1])} is of "
                f"session {origin[0]!r}: import one session file at a time",
            )
        if old.id in new_ids:
            raise source.error(
                pos, f"entry id {old.id!r} was already used at {source.where(first_pos[old.id])}"
            )
        if old.parent_id is None:
            if root_pos is not None:
                raise source.error(
                    pos, f"a second root entry (the first is at {source.where(root_pos)})"
                )
            root_pos = pos
            parent_id = None
        elif old.parent_id in new_ids:
            parent_id = new_ids[old.parent_id]
        else:
            raise source.error(pos, f"parent {old.parent_id!r} is not an earlier entry of the file")
        new_id = factory.entry_id(f"id:{old.id}")
        new_ids[old.id] = new_id
        first_pos[old.id] = pos
        wire = old.to_wire()
        wire["id"] = new_id
        wire["parentId"] = parent_id
        if old.kind == "custom":
            wire["data"] = _custom_data(wire["data"], new_ids)
        elif old.kind == "compaction" and "data" in wire:
            wire["data"] = _compaction_data(wire["data"], new_ids)
        entries.append(factory.make(pos, wire))
        factory.tick()
    return entries


def _custom_data(data: dict[str, Any], new_ids: dict[str, str]) -> dict[str, Any]:
    marker = data["type"]
    if marker.startswith("om."):
        return {"type": OM_RECORD_TYPE, "originalType": marker, "record": data}
    return _remap_import_refs(data, new_ids)


def _compaction_data(data: dict[str, Any], new_ids: dict[str, str]) -> dict[str, Any]:
    result = dict(data)
    if "memory" in result:
        result["importedMemory"] = result.pop("memory")
    for key in _SINGLE_REFS:
        value = result.get(key)
        if isinstance(value, str) and value in new_ids:
            result[key] = new_ids[value]
    for key in _LIST_REFS:
        value = result.get(key)
        if isinstance(value, list):
            result[key] = [new_ids.get(v, v) if isinstance(v, str) else v for v in value]
    return _remap_import_refs(result, new_ids)


def _remap_import_refs(data: dict[str, Any], new_ids: dict[str, str]) -> dict[str, Any]:
    refs = data.get("importRefs")
    if not isinstance(refs, dict):
        return data
    remapped = {k: new_ids.get(v, v) if isinstance(v, str) else v for k, v in refs.items()}
    return {**data, "importRefs": remapped}
