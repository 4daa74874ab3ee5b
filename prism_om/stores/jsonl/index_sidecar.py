"""The JSONL index sidecar: what a reopen needs of a session file, without parsing it.

``.<session_id>.index`` describes a prefix of ``<session_id>.jsonl`` that ends at a line
end. Its first line is a header, ``{"version": 1, "session": <id>, "bytes": <prefix
length>, "lines": <n>, "data": <sha256 of the prefix>, "body": <sha256 of line 2>,
"lastActivity": <newest entry time>}``; its second line the body, ``{"ids": [...],
"parents": [...], "kinds": "...", "encoding": <name>, "tokens": [...]}``: per line of the
prefix its entry id, its parent's id and one letter: ``e`` a message a page or recall
shows (user, assistant, tool), ``m`` any other message, ``x`` any other entry. ``tokens``
(optional, with ``encoding``) is per line the message's ``count_entry`` with that
tiktoken encoding, 0 for an ``x`` line: ``branch_tokens`` of a reopened session then
tokenises, and parses, no message line.

Trust: the index is used only when its version is this code's, it names the session of
the file, its prefix is no longer than the committed bytes being loaded and ends a line,
both digests match, its rows form a tree (unique ids, each parent on an earlier
line) and its token counts, when present, are one non-negative int per line (0 on ``x``
lines) with an encoding name. The prefix is then byte for byte what was validated when
the index was written, so a reopen places message lines in the tree from the index and
keeps them unparsed (``LazyEntries``); every other line, and the root, is parsed and
checked against its row. Lines after the prefix are read as without an index. Anything
else (missing, stale, truncated, damaged, another session's, another version) is
ignored: the data file stays the one source of truth, and deleting the index loses nothing.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import cast

from ...core.sources import is_eligible_observation_source_entry
from ...entries import SessionEntry
from ..segment_index.index import TreeIndex
from ..segment_index.lazy_entries import LazyEntries

__all__ = [
    "INDEX_VERSION",
    "LineIndex",
    "apply_index",
    "index_body",
    "index_name",
    "kind_of",
    "read_index",
]

INDEX_VERSION = 1
_KINDS = frozenset("emx")


@dataclass(frozen=True)
class LineIndex:
    """A trusted index: its rows, the prefix's lines and its length in bytes."""

    length: int
    ids: list[str]
    parents: list[str | None]
    kinds: str
    last_activity: str | None
    # The prefix, and where each of its lines starts (then its length): no line is
    # copied out of it but the few a load parses.
    data: bytes
    offsets: list[int]
    # Per line the message's token count with ``encoding`` (None: the index has none).
    tokens: list[int] | None = None
    encoding: str | None = None

    def line(self, at: int) -> bytes:
        return self.data[self.offsets[at] : self.offsets[at + 1] - 1]

    def line_length(self, at: int) -> int:
        return self.offsets[at + 1] - self.offsets[at] - 1


def index_name(session_id: str) -> str:
    return f".{session_id}.index"


def kind_of(entry: SessionEntry) -> str:
    if entry.kind != "message":
        return "x"
    return "e" if is_eligible_observation_source_entry(entry) else "m"


def _digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def index_body(
    session_id: str,
    prefix: bytes,
    ids: Sequence[str],
    parents: Sequence[str | None],
    kinds: str,
    last_activity: str | None,
    tokens: tuple[str, Sequence[int]] | None = None,
) -> bytes:
    """The index file for ``prefix`` (the data file's first bytes, ending a line);
    ``tokens`` is ``(encoding name, count per line)``."""
    rows: dict[str, object] = {"ids": ids, "parents": parents, "kinds": kinds}
    if tokens is not None:
        rows["encoding"], rows["tokens"] = tokens[0], list(tokens[1])
    body = json.dumps(rows).encode()
    header = {
        "version": INDEX_VERSION,
        "session": session_id,
        "bytes": len(prefix),
        "lines": len(ids),
        "data": _digest(prefix),
        "body": _digest(body),
        "lastActivity": last_activity,
    }
    return json.dumps(header).encode() + b"\n" + body + b"\n"


def read_index(raw: bytes, session_id: str, data: bytes) -> LineIndex | None:
    """The index ``raw`` if it can be trusted for ``data`` (the bytes being loaded)."""
    cut = raw.find(b"\n")
    try:
        header = json.loads(raw[:cut])
        if not isinstance(header, dict) or header.get("version") != INDEX_VERSION:
            return None
        length, count, last = header["bytes"], header["lines"], header["lastActivity"]
        if header["session"] != session_id or type(length) is not int or type(count) is not int:
            return None
        if not 0 < length <= len(data) or data[length - 1] != 0x0A:
            return None
        body = raw[cut + 1 :].rstrip(b"\n")
        if _digest(body) != header["body"] or (last is not None and type(last) is not str):
            return None
        with memoryview(data) as view:
            if _digest(view[:length]) != header["data"]:
                return None
        rows = json.loads(body)
        ids, parents, kinds = rows["ids"], rows["parents"], rows["kinds"]
        tokens, encoding = rows.get("tokens"), rows.get("encoding")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    offsets = [0]
    find = data.find
    at = find(b"\n", 0, length)
    while at >= 0:
        offsets.append(at + 1)
        at = find(b"\n", at + 1, length)
    if offsets[-1] != length or not (len(ids) == len(parents) == len(kinds) == count):
        return None
    if len(offsets) - 1 != count:
        return None
    if not _forms_tree(ids, parents, kinds):
        return None
    if (tokens is None) != (encoding is None) or (
        tokens is not None and not _counts_fit(tokens, encoding, kinds)
    ):
        return None
    return LineIndex(length, ids, parents, kinds, last, data, offsets, tokens, encoding)


def _counts_fit(tokens: object, encoding: object, kinds: str) -> bool:
    """One non-negative int per line, 0 on the lines that are no message."""
    if type(encoding) is not str or not encoding or type(tokens) is not list:
        return False
    if len(tokens) != len(kinds):
        return False
    return all(
        type(count) is int and count >= 0 and (count == 0 or kind != "x")
        for count, kind in zip(tokens, kinds, strict=True)
    )


def _forms_tree(ids: list[str], parents: list[str | None], kinds: object) -> bool:
    """Unique string ids, the root first and alone, each parent on an earlier line."""
    if not isinstance(kinds, str) or not _KINDS.issuperset(kinds) or not ids:
        return False
    if parents[0] is not None:
        return False
    seen: set[object] = set()
    for entry_id, parent in zip(ids, parents, strict=True):
        if type(entry_id) is not str or entry_id in seen or (parent not in seen and seen):
            return False
        seen.add(entry_id)
    return True


def apply_index(
    index: TreeIndex,
    session_id: str,
    found: LineIndex,
    parse: Callable[[int], SessionEntry | None],
) -> bool:
    """Add the prefix's entries to ``index``: messages unparsed, the rest parsed.

    ``parse(line number - 1)`` is None for a line that is no entry. Returns False, with
    ``index`` untouched, when a parsed line disagrees with its row or an id is already in
    the store: the caller then reads the file in full.
    """
    entries = index.entries
    if not isinstance(entries, LazyEntries) or session_id in index.trees:
        return False
    ids, parents, kinds = found.ids, found.parents, found.kinds
    if not entries.keys().isdisjoint(ids):
        return False
    parsed: dict[int, SessionEntry] = {}
    at = 0  # the root, then every "x" line
    while at >= 0:
        entry = parse(at)
        if (
            entry is None
            or entry.id != ids[at]
            or entry.parent_id != parents[at]
            or entry.session_id != session_id
            or kind_of(entry) != kinds[at]
        ):
            return False
        parsed[at] = entry
        at = kinds.find("x", at + 1)
    _place(index, session_id, found, parsed)
    return True


def _place_run(
    index: TreeIndex, session_id: str, order: list[str], found: LineIndex, start: int, end: int
) -> None:
    """Place message rows ``[start, end)``, each the only child of the row before it
    (placed already, so a leaf until now): what ``_place`` does row by row."""
    ids, kinds = found.ids, found.kinds
    run = ids[start:end]
    before = ids[start - 1]
    first = index.depth[before] + 1
    segment = index.segment[before]
    # LazyEntries.keep_at for each row: the lines stay in the file.
    entries = index.entries
    assert isinstance(entries, LazyEntries)
    offsets = found.offsets
    lengths = (offsets[i + 1] - offsets[i] - 1 for i in range(start, end))
    entries.keep_many_at(run, session_id, offsets[start:end], lengths)
    order.extend(run)
    index.depth.update(zip(run, range(first, first + len(run)), strict=True))
    index.segment.update(zip(run, repeat(segment)))
    index.children.update(zip(ids[start - 1 : end - 1], ([c] for c in run), strict=True))
    index.segment_ids[segment].extend(run)
    eligible = index.segment_messages[segment]
    at = kinds.find("e", start, end)
    while at >= 0:
        eligible.append(first + at - start)
        at = kinds.find("e", at + 1, end)
    index.memory_heads.update(zip(run, repeat(index.memory_heads[before])))


def _place(
    index: TreeIndex, session_id: str, found: LineIndex, parsed: dict[int, SessionEntry]
) -> None:
    """``TreeIndex.apply`` for each row, message rows without their entry (see there)."""
    entries = index.entries
    assert isinstance(entries, LazyEntries)
    keep = entries.keep_at
    children, depths, segments = index.children, index.depth, index.segment
    heads, segment_ids = index.memory_heads, index.segment_ids
    segment_messages, new_segment = index.segment_messages, index._new_segment
    ids, kinds = found.ids, found.kinds
    # Every row but the root's has a parent (``_forms_tree``).
    parents = cast(list[str], found.parents)
    index.apply((parsed[0],))
    tree = index.trees[session_id]
    order = tree.order
    messages = forks = 0
    count = len(ids)
    # Rows that cannot join a run: parsed ones, and those whose parent is not the line
    # before (a fork, or a branch going on from an older entry).
    stops = sorted({*parsed, *(i for i in range(1, count) if parents[i] != ids[i - 1])})
    stops.append(count)
    i = 1
    while i < count:
        entry = parsed.get(i)
        if entry is not None:
            index.apply((entry,))
            i += 1
            continue
        if parents[i] == ids[i - 1]:
            # A run of message rows, each the only child of the line before: placed with
            # a few bulk operations instead of a dozen lookups per row.
            end = stops[bisect_right(stops, i)]
            _place_run(index, session_id, order, found, i, end)
            messages += end - i
            i = end
            continue
        entry_id, parent_id = ids[i], parents[i]
        keep(entry_id, session_id, found.offsets[i], found.line_length(i))
        order.append(entry_id)
        depth = depths[parent_id] + 1
        siblings = children.get(parent_id)
        if siblings:
            segment = new_segment(segments[parent_id], depth)
            siblings.append(entry_id)
            forks += 1  # a new leaf; the parent was none already
        else:
            segment = segments[parent_id]
            children[parent_id] = [entry_id]
        depths[entry_id] = depth
        segments[entry_id] = segment
        segment_ids[segment].append(entry_id)
        if kinds[i] == "e":
            segment_messages[segment].append(depth)
        heads[entry_id] = heads[parent_id]
        messages += 1
        i += 1
    tree.messages += messages
    tree.leaf_count += forks
    tree.leaf = ids[-1]
    last = found.last_activity
    if last is not None and (tree.last_activity is None or last > tree.last_activity):
        tree.last_activity = last
