"""Search recall of the evidence turns: how many of a question's evidence turns the top 1, 5
and 10 hits of ``search_observational_memory`` (what ``prism-om search`` runs) rest on.

Each scored question with evidence is searched for its own text, in its conversation's
session, three ways: the default union of every kind (``union``), messages only
(``messages``), memory only (observations and reflections: ``memory``). A hit credits the
evidence turns among its ``sourceEntryIds`` (a message its own id; an observation its
sources; a reflection the sources of its observations), so a memory hit counts for the
turns it cites and a hit can credit only a turn of the question's own session (the
evidence ids are that session's entry ids). A question's recall@k is the share of its
evidence turns credited by the top k hits; the figures are its mean over the questions.

The tokens the top 5 and top 10 hits carry are counted on each unit's whole text (the
message, the observation, the reflection: what recalling it gives), not on its snippet,
so a big unit that cites many turns pays for the recall it buys.

The LoCoMo paper's figures (``LOCOMO_PAPER``) are quoted beside them, never measured here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rich.table import Table

from ..core.ledger import RecordedObservation, RecordedReflection
from ..core.search_text import text_terms
from ..entries import SessionEntry, entry_text
from ..observational_memory.search import search_observational_memory
from ..stores.base import SessionStore
from ..stores.search import SEARCH_QUERY_MAX_CHARS, SEARCH_QUERY_MAX_TERMS, SearchHit, SearchKind
from ..tokens import TokenEstimator

__all__ = [
    "KIND_SETS",
    "LOCOMO_PAPER",
    "RECALL_KS",
    "TOKEN_KS",
    "SearchRecall",
    "credited_evidence",
    "question_search_recall",
    "search_query",
    "search_recall_figures",
    "search_recall_table",
    "unit_tokens",
]

RECALL_KS: Final = (1, 5, 10)
TOKEN_KS: Final = (5, 10)
KIND_SETS: Final[dict[str, tuple[SearchKind, ...] | None]] = {
    "union": None,
    "messages": ("message",),
    "memory": ("observation", "reflection"),
}
"""The kinds each search is restricted to (None: every kind, the default)."""
LOCOMO_PAPER: Final[dict[str, Any]] = {
    "retriever": "DRAGON dense retriever",
    "recallAt5DialogTurns": 0.588,
    "recallAt5Observations": 0.496,
    "source": "the LoCoMo paper (Maharana et al., 2024) as issue 32 quotes it; not measured here",
}


@dataclass(frozen=True)
class SearchRecall:
    """One question's search, restricted to one kind set."""

    evidence: int
    """Its evidence turns (mapped to entries)."""
    found: tuple[int, ...]
    """Evidence turns credited by the top k hits, for each k of ``RECALL_KS``."""
    tokens: tuple[int, ...]
    """Tokens of the top k hits' whole units, for each k of ``TOKEN_KS``."""
    hits: int
    query_cut: bool = False
    """The question was cut to fit a search query's bounds (``search_query``)."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            f"foundAt{k}": n for k, n in zip(RECALL_KS, self.found, strict=True)
        }
        data.update({f"tokensTop{k}": n for k, n in zip(TOKEN_KS, self.tokens, strict=True)})
        data["hits"] = self.hits
        data["queryCut"] = self.query_cut
        return data


def credited_evidence(hits: Sequence[SearchHit], evidence: Collection[str], k: int) -> int:
    """How many of ``evidence`` (entry ids) the top ``k`` hits cite in their sources."""
    wanted = set(evidence)
    cited = {s for hit in hits[:k] for s in hit.source_entry_ids}
    return len(wanted & cited)


def search_query(question: str) -> tuple[str, bool]:
    """The question as a search query, and whether it had to be cut.

    A search refuses more than ``SEARCH_QUERY_MAX_CHARS`` characters or
    ``SEARCH_QUERY_MAX_TERMS`` distinct terms; a longer question is cut at the word where
    either limit would be passed, as a user would shorten it.
    """
    words = question.split()
    kept: list[str] = []
    seen: set[str] = set()
    for word in words:
        terms = seen | set(text_terms(word))
        if (
            len(terms) > SEARCH_QUERY_MAX_TERMS
            or len(" ".join([*kept, word])) > SEARCH_QUERY_MAX_CHARS
        ):
            break
        kept.append(word)
        seen = terms
    return " ".join(kept), len(kept) < len(words)


def unit_tokens(
    entries: Iterable[SessionEntry],
    observations: Iterable[RecordedObservation],
    reflections: Iterable[RecordedReflection],
    estimator: TokenEstimator,
) -> Callable[[SearchHit], int]:
    """The token count of a hit's whole unit: the message's text, the observation's, the
    reflection's (a unit not listed, which the conversation's search never returns, is
    counted on its snippet)."""
    units = {("message", e.id): estimator.count(entry_text(e)) for e in entries}
    units.update({("observation", o.id): estimator.count(o.observation.text) for o in observations})
    units.update({("reflection", r.id): estimator.count(r.reflection.text) for r in reflections})
    return lambda hit: units.get((hit.kind, hit.id), estimator.count(hit.text))


async def question_search_recall(
    store: SessionStore,
    session_id: str,
    question: str,
    evidence: Collection[str],
    unit_tokens: Callable[[SearchHit], int],
) -> dict[str, SearchRecall]:
    """The recall of ``evidence`` by searching ``session_id`` for ``question``, per kind set.

    ``unit_tokens(hit)`` is the token count of the hit's whole unit.
    """
    query, cut = search_query(question)
    out: dict[str, SearchRecall] = {}
    for name, kinds in KIND_SETS.items():
        hits: Sequence[SearchHit] = ()
        if query:
            results = await search_observational_memory(
                store, session_id, query, limit=max(RECALL_KS), kinds=kinds
            )
            hits = results.hits
        out[name] = SearchRecall(
            evidence=len(set(evidence)),
            found=tuple(credited_evidence(hits, evidence, k) for k in RECALL_KS),
            tokens=tuple(sum(unit_tokens(h) for h in hits[:k]) for k in TOKEN_KS),
            hits=len(hits),
            query_cut=cut,
        )
    return out


def search_recall_figures(searches: Iterable[Mapping[str, SearchRecall]]) -> dict[str, Any]:
    """Per kind set: the questions, their evidence turns, mean recall@k and mean tokens of
    the top k (None when no question had evidence)."""
    measured = [s for s in searches if s]
    figures: dict[str, Any] = {}
    for name in KIND_SETS:
        rows = [s[name] for s in measured if s[name].evidence]
        n = len(rows)
        entry: dict[str, Any] = {
            "questions": n,
            "evidenceTurns": sum(r.evidence for r in rows),
            "cutQueries": sum(r.query_cut for r in rows),
        }
        for i, k in enumerate(RECALL_KS):
            share = sum(r.found[i] / r.evidence for r in rows)
            entry[f"recallAt{k}"] = round(share / n, 4) if n else None
        for i, k in enumerate(TOKEN_KS):
            entry[f"tokensTop{k}"] = round(sum(r.tokens[i] for r in rows) / n, 1) if n else None
        figures[name] = entry
    return figures


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def search_recall_table(summary: Mapping[str, Any]) -> Table:
    """Recall@1/5/10 and the tokens of the top 5 / 10, per category and kind set, with
    the LoCoMo paper's figures beside them for a LoCoMo run."""
    table = Table(title="search recall of the evidence turns (prism-om search, top 10 hits)")
    for name in ("category", "kinds", "questions", "@1", "@5", "@10", "tok top 5", "tok top 10"):
        table.add_column(name, justify="left" if name in ("category", "kinds") else "right")
    rows = [*summary["categories"].items(), ("all", summary["overall"])]
    for n, (category, figures) in enumerate(rows):
        recall = figures.get("searchRecall") or {}
        if not any(v["questions"] for v in recall.values()):
            continue
        for i, (kinds, v) in enumerate(recall.items()):
            table.add_row(
                category if i == 0 else "",
                kinds,
                str(v["questions"]),
                *(_percent(v[f"recallAt{k}"]) for k in RECALL_KS),
                *(
                    "-" if v[f"tokensTop{k}"] is None else f"{v[f'tokensTop{k}']:.0f}"
                    for k in TOKEN_KS
                ),
                end_section=i == len(recall) - 1 and n < len(rows) - 1,
            )
    if summary.get("format") == "locomo":
        paper = LOCOMO_PAPER
        table.add_section()
        for kinds, key in (
            ("dialog turns", "recallAt5DialogTurns"),
            ("observations", "recallAt5Observations"),
        ):
            label = "LoCoMo paper (DRAGON)" if kinds == "dialog turns" else ""
            table.add_row(label, kinds, "-", "-", _percent(paper[key]), "-", "-", "-")
    return table
