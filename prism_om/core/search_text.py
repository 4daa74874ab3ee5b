"""The one normaliser of search: what a text's terms are, for every adapter alike.

Every adapter indexes and every search ranks with these functions, so the engines never
tokenise, stem or drop stop words themselves and cannot disagree about a match
(``docs/search.md``). A text's terms are its runs of letters and digits, casefolded and
NFKC-normalised, English stop words left out, each reduced by a small suffix-stripping
stemmer (``billing``, ``bills`` and ``billed`` are all ``bill``). A term longer than
``MAX_TERM_CHARS`` is no term (a hash, a blob), and a text indexes at most
``MAX_INDEXED_TERMS`` distinct terms (the first ones), so one huge tool output cannot
grow the index without bound.

The index holds ``term_key(term)``, a 31-bit hash of the term, not the term itself: it is
smaller than the word and fits both engines' integer columns. Two terms sharing a key
only make an extra candidate, which the ranking drops, as it scores the text itself.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Iterable
from typing import Final

from ..entries import Message, message_text

__all__ = [
    "MAX_INDEXED_TERMS",
    "MAX_TERM_CHARS",
    "STOP_WORDS",
    "index_keys",
    "keys_of",
    "message_search_text",
    "stem",
    "term_key",
    "text_terms",
]

MAX_TERM_CHARS: Final = 48
MAX_INDEXED_TERMS: Final = 4096

# Runs of letters and digits: the underscore that \w also takes splits words here.
_WORD: Final = re.compile(r"[^\W_]+")

STOP_WORDS: Final = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves s t d ll m re ve""".split()
)

_VOWELS: Final = frozenset("aeiouy")


def _has_vowel(text: str) -> bool:
    return any(c in _VOWELS for c in text)


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """``word`` less its common English inflection (a light, Porter-like stemmer).

    Words of three letters or fewer and words holding a digit stay as they are. Plurals
    first (``-ies`` -> ``-y``, ``-sses`` -> ``-ss``, a lone ``-s``), then ``-ing`` /
    ``-ed`` when a vowel stays before them (a doubled consonant left behind is undoubled:
    ``running`` -> ``run``), then ``-ly``, then a final ``-e``.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            if _has_vowel(base):
                word = base
                if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                    word = word[:-1]
                break
    if word.endswith("ly") and len(word) > 5:
        word = word[:-2]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


# Each word's term (None: a stop word or too long), remembered: a text is mostly words
# seen before, and a dict lookup costs less than the checks and the stemmer.
_TERM_OF: dict[str, str | None] = {}
_TERM_OF_SIZE: Final = 200_000


def _term_of(word: str) -> str | None:
    term = None if len(word) > MAX_TERM_CHARS or word in STOP_WORDS else stem(word)
    if len(_TERM_OF) < _TERM_OF_SIZE:
        _TERM_OF[word] = term
    return term


def _terms(text: str) -> list[str]:
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    known = _TERM_OF
    out: list[str] = []
    for word in _WORD.findall(text.casefold()):
        term = known[word] if word in known else _term_of(word)
        if term is not None:
            out.append(term)
    return out


def text_terms(text: str) -> list[str]:
    """The terms of ``text`` in order, repeats kept (what the ranking counts)."""
    return _terms(text)


@functools.lru_cache(maxsize=131072)
def term_key(term: str) -> int:
    """The 31-bit key the index stores for ``term`` (positive, fits a 32-bit integer)."""
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


def index_keys(text: str) -> tuple[int, ...]:
    """The keys an index holds for ``text``: its first ``MAX_INDEXED_TERMS`` distinct
    terms' ``term_key``, distinct (sorted, so every adapter writes the same rows)."""
    distinct = dict.fromkeys(_terms(text))
    if len(distinct) > MAX_INDEXED_TERMS:
        distinct = dict.fromkeys(list(distinct)[:MAX_INDEXED_TERMS])
    return tuple(sorted({term_key(t) for t in distinct}))


def message_search_text(message: Message) -> str:
    """What of a message is searched: its text and its tool calls (``message_text``)."""
    return message_text(message)


def keys_of(terms: Iterable[str]) -> frozenset[int]:
    """``term_key`` of each term."""
    return frozenset(term_key(t) for t in terms)
