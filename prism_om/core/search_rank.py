"""The one ranking of search: BM25 over the candidates, in Python, for every adapter.

The engines only fetch candidates by index; the order comes from here, so SQLite,
PostgreSQL, JSONL and the in-memory store return the same hits in the same order. Each
candidate is scored on the terms of its redacted text (``search_text.text_terms``), with
the statistics of the candidate set itself: ``N`` candidates, ``df(t)`` of them holding
term ``t``, their mean length ``avgdl``::

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d) = sum over query terms t in d of
               idf(t) * tf(t, d) * (K1 + 1) / (tf(t, d) + K1 * (1 - B + B * |d| / avgdl))

A candidate holding no query term (its match was inside a redacted secret, or a key
collision) is no hit. Ties are broken by kind (reflection, observation, message), then
newest first, then id, so the order is total. Every statistic is an integer count, so
each score is the same float wherever it is computed.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from .search_text import text_terms
from .timestamps import utc_timestamp

__all__ = ["B", "K1", "KIND_ORDER", "RankedDoc", "SNIPPET_CHARS", "rank", "snippet"]

K1: Final = 1.2
B: Final = 0.75
SNIPPET_CHARS: Final = 240
KIND_ORDER: Final = {"reflection": 0, "observation": 1, "message": 2}

_T = TypeVar("_T")


@dataclass(frozen=True)
class RankedDoc(Generic[_T]):
    """One hit: what was ranked (``item``), its score and its terms' first position."""

    item: _T
    score: float
    text: str


def rank(
    docs: Iterable[tuple[_T, str, str, str, str]],
    query_terms: Collection[str],
    limit: int | None = None,
) -> list[RankedDoc[_T]]:
    """The docs holding a query term, best first (the first ``limit`` of them).

    ``docs`` are ``(item, kind, id, timestamp, redacted text)``; the result keeps each
    hit's item and text. See the module docstring for the formula and the tie-break.
    """
    wanted = frozenset(query_terms)
    scored: list[tuple[_T, str, str, str, str, dict[str, int], int]] = []
    for item, kind, doc_id, timestamp, text in docs:
        counts, length = _term_counts(text)
        held = {t: counts[t] for t in wanted if t in counts}
        if held:
            scored.append((item, kind, doc_id, timestamp, text, held, length))
    if not scored:
        return []
    n = len(scored)
    avgdl = sum(s[6] for s in scored) / n
    df: Counter[str] = Counter()
    for s in scored:
        df.update(s[5].keys())
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in df}
    keyed: list[tuple[float, int, int]] = []
    for at, (_item, kind, _id, _ts, _text, counts, length) in enumerate(scored):
        norm = K1 * (1 - B + B * length / avgdl) if avgdl else K1
        score = 0.0
        for term in sorted(counts):  # one summation order everywhere
            tf = counts[term]
            score += idf[term] * tf * (K1 + 1) / (tf + norm)
        keyed.append((-score, KIND_ORDER[kind], at))
    # Only the first ``limit`` by (score, kind), and every doc tied with the last of them,
    # can be hits: the rest never needs its timestamp read.
    keyed.sort()
    if limit is not None and len(keyed) > limit:
        edge = keyed[limit - 1][:2]
        cut = limit
        while cut < len(keyed) and keyed[cut][:2] == edge:
            cut += 1
        keyed = keyed[:cut]
    ranked: list[tuple[float, int, str, str, RankedDoc[_T]]] = []
    for neg, kind_order, at in keyed:
        item, _kind, doc_id, timestamp, text, _counts, _length = scored[at]
        when = utc_timestamp(timestamp) or ""
        ranked.append((neg, kind_order, when, doc_id, RankedDoc(item, -neg, text)))
    # Stable sorts, last key first: id, then newest first, then score and kind.
    ranked.sort(key=lambda r: r[3])
    ranked.sort(key=lambda r: r[2], reverse=True)
    ranked.sort(key=lambda r: (r[0], r[1]))
    return [r[4] for r in ranked][:limit]


@functools.lru_cache(maxsize=8192)
def _term_counts(text: str) -> tuple[dict[str, int], int]:
    # A message's or a memory item's (redacted) text is searched again and again in one
    # session; its terms are the same every time. (Callers only read the counts.)
    terms = text_terms(text)
    return dict(Counter(terms)), len(terms)


def snippet(text: str, query_terms: Collection[str], width: int = SNIPPET_CHARS) -> str:
    """Up to ``width`` characters of ``text`` around its first query term (whole when short).

    ``text`` is already redacted; a cut is marked with ``…`` at either end.
    """
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    start = _first_match(flat, query_terms)
    lo = max(0, min(start - width // 4, len(flat) - width))
    hi = lo + width
    out = flat[lo:hi]
    return ("…" if lo else "") + out + ("…" if hi < len(flat) else "")


def _first_match(text: str, query_terms: Collection[str]) -> int:
    from .search_text import _WORD, MAX_TERM_CHARS, STOP_WORDS, stem

    wanted = frozenset(query_terms)
    for match in _WORD.finditer(text.lower()):
        word = match.group()
        if len(word) <= MAX_TERM_CHARS and word not in STOP_WORDS and stem(word) in wanted:
            return match.start()
    return 0


def order_of(kinds: Sequence[str]) -> tuple[str, ...]:
    """``kinds`` in ``KIND_ORDER``."""
    return tuple(sorted(kinds, key=KIND_ORDER.__getitem__))
