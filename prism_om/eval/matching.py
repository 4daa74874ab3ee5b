"""Answer matching without a model: are an answer's key words all present in a text?

The rule, fixed with the evaluation data (``stopwords.txt`` beside this module):

1. lower-case;
2. drop apostrophes (``Mary's`` → ``marys``) and thousands separators (``14,500`` →
   ``14500``); every other character that is not a letter or digit separates words;
3. the key words are the remaining words that are not stopwords;
4. an answer matches a text when every key word of the answer is a word of the text.

A word must match whole (``cat`` is not found in ``category``); there is no stemming.
An answer with no key word left (only stopwords) matches nothing: it cannot be checked.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = ["answer_in_text", "key_words", "missing_key_words", "stopwords", "text_words"]

_APOSTROPHES = re.compile(r"['\u2019\u2018`]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_SEPARATORS = re.compile(r"[^0-9a-z]+")


@cache
def stopwords() -> frozenset[str]:
    """The committed stopword list."""
    text = resources.files("prism_om.eval").joinpath("stopwords.txt").read_text("utf-8")
    return frozenset(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    )


def _words(text: str) -> list[str]:
    cleaned = _THOUSANDS.sub("", _APOSTROPHES.sub("", text.lower()))
    return [w for w in _SEPARATORS.split(cleaned) if w]


def key_words(answer: str | int | float) -> list[str]:
    """The answer's key words, in order, without repeats."""
    stop = stopwords()
    return list(dict.fromkeys(w for w in _words(str(answer)) if w not in stop))


def text_words(text: str) -> frozenset[str]:
    """Every word of ``text`` (stopwords included), for repeated look-ups."""
    return frozenset(_words(text))


def missing_key_words(answer: str | int | float, text: str | frozenset[str]) -> list[str]:
    """The answer's key words absent from ``text``."""
    words = text if isinstance(text, frozenset) else text_words(text)
    return [w for w in key_words(answer) if w not in words]


def answer_in_text(answer: str | int | float, text: str | frozenset[str]) -> bool:
    """True when the answer has key words and every one is a word of ``text``."""
    keys = key_words(answer)
    return bool(keys) and not missing_key_words(answer, text)
