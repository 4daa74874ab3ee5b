"""``SessionStore.search``: the checks, the withholding and the ranking every adapter shares.

An adapter supplies only its candidates: the eligible messages of the branch whose
indexed keys (``core.search_text.index_keys``) meet the query's, and optionally which
memory ids do (None: every memory item of the ledger is a candidate). Everything else is
here, once: the query's checks and bounds, the ledger read (the live ledger, or the full
one when something is revoked or inactive memory is asked for), the withholding rule of
every read path (``core.projection``), the redaction of every text before it is ranked,
the ranking (``core.search_rank``) and the hits. So every adapter returns the same hits
in the same order, and none can leak what another withholds.

Safety, in order: a revoked message or a withheld memory item is no candidate (it can
neither match nor count in the statistics); the text of every candidate is redacted of
the secrets before it is scored, so a match inside a secret is no match; a query term
that is a term of a known secret is dropped before anything is read, so a query cannot
confirm a secret by the hits it gets (or their scores).
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from .._gc import collector_paused
from ..core.ledger import ObservationalMemoryLedger, RecordedObservation, RecordedReflection
from ..core.ledger_views import live_ledger
from ..core.projection import invalidated_observation_ids, withheld_reflection_ids
from ..core.redaction import Redactor, redacted_message_text, redactor
from ..core.search_rank import KIND_ORDER, rank, snippet
from ..core.search_text import index_keys, keys_of, message_search_text, text_terms
from ..core.shown import shown
from ..core.sources import ELIGIBLE_SOURCE_ROLES
from ..entries import Message, SessionEntry, find_lone_surrogate
from ..errors import InvalidInputError, LimitExceededError, PageTooLargeError

if TYPE_CHECKING:
    from .base import SessionStore

__all__ = [
    "MessageCandidate",
    "shown_keys",
    "SEARCH_CANDIDATES_PER_TERM",
    "SEARCH_KINDS",
    "SEARCH_LIMIT_HARD_CAP",
    "SEARCH_QUERY_MAX_CHARS",
    "SEARCH_QUERY_MAX_TERMS",
    "SearchHit",
    "SearchKind",
    "SearchQuery",
    "check_search",
    "run_search",
    "scan_message_candidates",
]

SearchKind = Literal["observation", "reflection", "message"]
SearchStatus = Literal["active", "dropped", "superseded"]
SEARCH_KINDS: Final[tuple[SearchKind, ...]] = ("observation", "reflection", "message")
SEARCH_LIMIT_HARD_CAP: Final = 100
SEARCH_QUERY_MAX_CHARS: Final = 500
SEARCH_QUERY_MAX_TERMS: Final = 32
# Messages a query term brings as candidates at most: the newest ones holding it. A rare
# term brings all its matches; a term found all over the session brings its newest
# SEARCH_CANDIDATES_PER_TERM, so a search costs at most that many per term, whatever the
# session's length (the rare terms of a query still reach back to the root).
SEARCH_CANDIDATES_PER_TERM: Final = 200

# (leaf id, query keys) -> the candidates on the branch ending at that leaf.
MessageCandidate = tuple[str, str, Message]
"""(entry id, timestamp, message): one message candidate, among the newest
``SEARCH_CANDIDATES_PER_TERM`` messages whose text shows one of the query's keys."""
MessageCandidates = Callable[[str, frozenset[int]], Awaitable[builtins.list[MessageCandidate]]]
MemoryCandidates = Callable[[str, frozenset[int]], Awaitable[builtins.set[str] | None]]


@dataclass(frozen=True)
class SearchHit:
    """One search result: a memory item or a message, with its sources.

    ``text`` is a redacted snippet of it; ``source_entry_ids`` are the entries it rests
    on (an observation's sources, the sources of a reflection's observations, a message's
    own id); ``status`` is ``dropped`` / ``superseded`` only for inactive memory, which a
    search returns only with ``include_inactive``.
    """

    kind: SearchKind
    id: str
    score: float
    text: str
    timestamp: str
    source_entry_ids: tuple[str, ...]
    status: SearchStatus = "active"
    observation_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"kind", "id", "score", "text", "timestamp", "sourceEntryIds"}``, with
        ``"status"`` for an inactive item and ``"observationIds"`` for a reflection."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "id": self.id,
            "score": round(self.score, 4),
            "text": self.text,
            "timestamp": self.timestamp,
            "sourceEntryIds": list(self.source_entry_ids),
        }
        if self.kind == "reflection":
            out["observationIds"] = list(self.observation_ids)
        if self.status != "active":
            out["status"] = self.status
        return out


@dataclass(frozen=True)
class SearchQuery:
    """A search's checked arguments: the query's terms (secret terms already dropped)."""

    query: str
    terms: tuple[str, ...]
    limit: int
    kinds: frozenset[SearchKind]
    include_inactive: bool
    invalidated: frozenset[str]
    redactor: Redactor

    @property
    def keys(self) -> frozenset[int]:
        return keys_of(self.terms)


def check_search(
    query: object,
    *,
    limit: object = 10,
    kinds: object = None,
    include_inactive: object = False,
    invalidated_ids: object = None,
    secrets: Iterable[str] | Redactor | None = None,
) -> SearchQuery:
    """The checked arguments of a search, or a typed error naming the argument.

    ``query``: a non-empty string of at most ``SEARCH_QUERY_MAX_CHARS`` characters and
    ``SEARCH_QUERY_MAX_TERMS`` distinct terms (``LimitExceededError`` beyond); its text is
    never handed to an engine, only the keys of its terms. ``limit``: 1 to
    ``SEARCH_LIMIT_HARD_CAP`` (``PageTooLargeError`` above). ``kinds``: some of
    ``SEARCH_KINDS`` (None: all).
    """
    red = redactor(secrets)
    if not isinstance(query, str):
        raise InvalidInputError(f"query must be a string, got {shown(query)}", field="query")
    if len(query) > SEARCH_QUERY_MAX_CHARS:
        raise LimitExceededError(
            f"query must be at most {SEARCH_QUERY_MAX_CHARS} characters, got {len(query):,}",
            field="query",
        )
    if not query.strip():
        raise InvalidInputError("query must be a non-empty string", field="query")
    if find_lone_surrogate(query) is not None:
        raise InvalidInputError(
            "query holds a lone surrogate (half of a UTF-16 pair): it must be valid Unicode",
            field="query",
        )
    terms = tuple(dict.fromkeys(text_terms(query)))
    if len(terms) > SEARCH_QUERY_MAX_TERMS:
        raise LimitExceededError(
            f"query has {len(terms)} distinct terms; at most {SEARCH_QUERY_MAX_TERMS} are searched",
            field="query",
        )
    if red:
        # A term of a secret is dropped: a query could otherwise confirm it by its hits.
        secret_terms = {t for secret in red.secrets for t in text_terms(secret)}
        terms = tuple(t for t in terms if t not in secret_terms)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError(
            f"limit must be an integer from 1 to {SEARCH_LIMIT_HARD_CAP}, got {shown(limit)}",
            field="limit",
        )
    if limit > SEARCH_LIMIT_HARD_CAP:
        raise PageTooLargeError(
            f"limit = {shown(limit)} exceeds its hard cap of {SEARCH_LIMIT_HARD_CAP}",
            field="limit",
        )
    if not isinstance(include_inactive, bool):
        raise InvalidInputError(
            f"include_inactive must be a bool, got {shown(include_inactive)}",
            field="include_inactive",
        )
    from ..core.withheld import check_invalidation_ids

    # Only None means "nothing revoked": a falsy non-collection (0, "") is refused there.
    invalid = check_invalidation_ids(() if invalidated_ids is None else invalidated_ids)
    return SearchQuery(query, terms, limit, _check_kinds(kinds), include_inactive, invalid, red)


def _check_kinds(kinds: object) -> frozenset[SearchKind]:
    if kinds is None:
        return frozenset(SEARCH_KINDS)
    if isinstance(kinds, str):
        kinds = (kinds,)
    if not isinstance(kinds, Iterable):
        raise InvalidInputError(
            f"kinds must be some of {', '.join(SEARCH_KINDS)}, got {shown(kinds)}", field="kinds"
        )
    out: set[SearchKind] = set()
    for kind in kinds:
        if kind not in SEARCH_KINDS:
            raise InvalidInputError(
                f"kinds: {shown(kind)} is no kind; expected one of {', '.join(SEARCH_KINDS)}",
                field="kinds",
            )
        out.add(kind)
    if not out:
        raise InvalidInputError("kinds must name at least one kind", field="kinds")
    return frozenset(out)


# (kind, id, timestamp, sources, status, observation ids): what a hit is built from.
_Item = tuple[SearchKind, str, str, tuple[str, ...], SearchStatus, tuple[str, ...]]


async def run_search(
    store: SessionStore,
    session_id: str,
    leaf_id: str | None,
    q: SearchQuery,
    messages: MessageCandidates,
    memory: MemoryCandidates,
) -> builtins.list[SearchHit]:
    """The ranked hits of ``q`` on the branch (see the module docstring).

    The leaf is resolved once, first, so every read is of one branch however the session
    moves meanwhile; an unknown session has no hit. The cyclic collector is paused for
    the search (``_gc``): its candidates are thousands of short-lived objects holding no
    cycle, and in a process holding many objects each collection they set off was a
    full one (measured: 36 ms of a 100 ms search at 100,000 entries).
    """
    with collector_paused():
        if leaf_id is None:
            leaf_id = await store.leaf(session_id)
            if leaf_id is None:
                return []
        else:
            await store.entry_count(session_id, leaf_id)  # raises for a leaf off the session
        if not q.terms:
            # Nothing left to match (stop words only, or a secret's terms): no hit, as for a
            # miss, so the answer says nothing about the secret.
            return []
        keys = q.keys
        red = q.redactor
        docs: builtins.list[tuple[_Item, str, str, str, str]] = []
        if "message" in q.kinds:
            for entry_id, timestamp, message in await messages(leaf_id, keys):
                if entry_id in q.invalidated:
                    continue  # a revoked message keeps no text: it cannot match
                item: _Item = ("message", entry_id, timestamp, (entry_id,), "active", ())
                # The candidate reads count a message for a key only where the key shows
                # in its redacted text: none was found by what a secret hides.
                text = redacted_message_text(message, red)
                docs.append((item, "message", entry_id, timestamp, text))
        if q.kinds & {"observation", "reflection"}:
            wanted = await memory(leaf_id, keys)
            if q.include_inactive or q.invalidated:
                # Withholding judges the whole ledger (what a reflection rests on).
                ledger = await store.ledger(session_id, leaf_id)
            elif wanted is None:
                ledger = await store.live_ledger(session_id, leaf_id)
            else:
                # Only the items the index found: their rows by id, with their drops and
                # supersessions, give the same active items as the live view, at the cost
                # of the matches rather than of the whole active memory.
                subset = await store.memory_subset(session_id, sorted(wanted), leaf_id)
                ledger = live_ledger(subset)
            docs.extend(_memory_docs(ledger, q, wanted, keys))
        ranked = rank(docs, q.terms, q.limit)
        hits = [
            SearchHit(kind, id_, r.score, snippet(r.text, q.terms), ts, sources, status, obs)
            for r in ranked
            for kind, id_, ts, sources, status, obs in (r.item,)
        ]
        return await _with_reflection_sources(store, session_id, leaf_id, hits)


def _memory_docs(
    ledger: ObservationalMemoryLedger,
    q: SearchQuery,
    wanted: Collection[str] | None,
    keys: frozenset[int],
) -> builtins.list[tuple[_Item, str, str, str, str]]:
    """The ledger's memory items that may be hits: not withheld, active unless
    ``include_inactive``, among ``wanted`` (None: those whose ``index_keys`` meet
    ``keys``, as an index would find them), with their redacted text."""
    invalid = q.invalidated
    withheld = invalidated_observation_ids(ledger.observations, invalid) | invalid
    gone = withheld_reflection_ids(ledger, withheld)
    dropped = frozenset(ledger.dropped_observation_ids)
    superseded = ledger.superseded_by
    red = q.redactor
    out: builtins.list[tuple[_Item, str, str, str, str]] = []
    if "observation" in q.kinds:
        for o in ledger.observations:
            if o.id in withheld or not _candidate(o.id, o.observation.text, wanted, keys):
                continue
            status: SearchStatus = "dropped" if o.id in dropped else "active"
            if status != "active" and not q.include_inactive:
                continue
            out.append(_observation_doc(o, status, red))
    if "reflection" in q.kinds:
        for r in ledger.reflections:
            if r.id in gone or not _candidate(r.id, r.reflection.text, wanted, keys):
                continue
            by = superseded.get(r.id)
            status = "superseded" if by is not None and by not in gone else "active"
            if status != "active" and not q.include_inactive:
                continue
            out.append(_reflection_doc(r, status, red))
    return out


def _candidate(
    memory_id: str, text: str, wanted: Collection[str] | None, keys: frozenset[int]
) -> bool:
    if wanted is not None:
        return memory_id in wanted
    return not keys.isdisjoint(_memory_keys(text))


@functools.lru_cache(maxsize=8192)
def _memory_keys(text: str) -> tuple[int, ...]:
    # A memory item's text never changes; the same text keys the same.
    return index_keys(text)


def _observation_doc(
    o: RecordedObservation, status: SearchStatus, red: Redactor
) -> tuple[_Item, str, str, str, str]:
    obs = o.observation
    at = obs.observed_at or o.recorded_at
    item: _Item = ("observation", o.id, at, tuple(obs.source_entry_ids), status, ())
    return item, "observation", o.id, at, red.text(obs.text)


def _reflection_doc(
    r: RecordedReflection, status: SearchStatus, red: Redactor
) -> tuple[_Item, str, str, str, str]:
    refl = r.reflection
    item: _Item = ("reflection", r.id, r.recorded_at, (), status, tuple(refl.observation_ids))
    return item, "reflection", r.id, r.recorded_at, red.text(refl.text)


async def _with_reflection_sources(
    store: SessionStore, session_id: str, leaf_id: str | None, hits: builtins.list[SearchHit]
) -> builtins.list[SearchHit]:
    """Each reflection hit with the sources of its observations (dropped ones included:
    ``memory_subset`` reads the whole ledger by id), in citation order."""
    wanted = {o for h in hits if h.kind == "reflection" for o in h.observation_ids}
    if not wanted:
        return hits
    subset = await store.memory_subset(session_id, sorted(wanted), leaf_id)
    sources = {o.id: o.observation.source_entry_ids for o in subset.observations}
    out = []
    for hit in hits:
        if hit.kind == "reflection":
            cited = dict.fromkeys(s for o in hit.observation_ids for s in sources.get(o, ()))
            hit = SearchHit(
                hit.kind,
                hit.id,
                hit.score,
                hit.text,
                hit.timestamp,
                tuple(cited),
                hit.status,
                hit.observation_ids,
            )
        out.append(hit)
    return out


def scan_message_candidates(
    branch: Sequence[SessionEntry],
    keys: frozenset[int],
    cache: dict[str, tuple[int, ...]] | None = None,
    cache_size: int = 0,
    red: Redactor | None = None,
) -> builtins.list[MessageCandidate]:
    """The eligible messages of ``branch`` that an index gives for ``keys``: for each key,
    the newest ``SEARCH_CANDIDATES_PER_TERM`` messages whose ``index_keys`` hold it. Found
    by a scan from the leaf back; ``cache`` keeps each message's keys by entry id (at
    most ``cache_size``, oldest evicted first), as an entry's text never changes. With a
    redactor that hides something, a message counts for a key only while the key shows
    in its redacted text (``shown_keys``), as the SQL stores' index read counts it."""
    found: builtins.list[MessageCandidate] = []
    taken = dict.fromkeys(keys, 0)
    cap = SEARCH_CANDIDATES_PER_TERM
    hiding = bool(red)
    for index in range(len(branch) - 1, -1, -1):
        entry = branch[index]
        message = entry.message
        if message is None or message.role not in ELIGIBLE_SOURCE_ROLES:
            continue
        held = None if cache is None else cache.get(entry.id)
        if held is None:
            held = index_keys(message_search_text(message))
            if cache is not None:
                if len(cache) >= cache_size:
                    cache.pop(next(iter(cache)))
                cache[entry.id] = held
        by: builtins.list[int] = []
        for key in held:
            count = taken.get(key)
            if count is not None and count < cap:
                by.append(key)
        if by and hiding:
            shows = shown_keys(message, red)
            by = [key for key in by if key in shows]
        for key in by:
            taken[key] += 1
        if by:
            found.append((entry.id, entry.timestamp, message))
        if taken and min(taken.values()) >= cap:
            break  # every key has its newest matches: older ones cannot be candidates
    return found


def shown_keys(message: Message, red: Redactor | None) -> frozenset[int]:
    """The index keys of a message's text as a read with ``red`` shows it."""
    return frozenset(index_keys(redacted_message_text(message, red)))


def sort_kinds(kinds: Iterable[SearchKind]) -> builtins.list[SearchKind]:
    """``kinds`` in ranking order (reflection, observation, message)."""
    return sorted(kinds, key=KIND_ORDER.__getitem__)
