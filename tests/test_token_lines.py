"""``TokenEstimator.count_lines``: ``count`` exactly, encoding only lines not seen before
(issue 16: the per-turn context blocks re-encoded their whole text on every call)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import prism_om.tokens as tokens
from prism_om.tokens import TOKEN_CHUNK_CHARS, LineMemo, TokenEstimator, get_estimator

ESTIMATOR = get_estimator()
pytestmark = pytest.mark.skipif(
    ESTIMATOR.name == tokens.HEURISTIC_ENCODING, reason="no tiktoken encoding loadable"
)

# Lines of any characters (newlines, "\r", spaces, punctuation, "/", digits, CJK...).
PIECES = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.sampled_from(["\n", "\n\n", "\r\n", " \n", ".\n", "\n/", "\n ", "- [", "'s", "12345"]),
)


@st.composite
def rendered_like(draw: st.DrawFn) -> str:
    return "".join(draw(st.lists(PIECES, max_size=60)))


def counting() -> tuple[TokenEstimator, list[str]]:
    """An estimator of the default encoding that records every text it encodes."""
    seen: list[str] = []

    def encode(text: str) -> Any:
        seen.append(text)
        return ESTIMATOR._encode(text)

    return TokenEstimator(ESTIMATOR.name, encode, LineMemo()), seen


@settings(max_examples=400, deadline=None)
@given(rendered_like())
def test_count_lines_equals_count(text: str) -> None:
    assert "".join(tokens._lines(text)) == text
    est, _ = counting()
    assert est.count_lines(text) == ESTIMATOR.count(text)
    assert est.count_lines(text) == ESTIMATOR.count(text)  # from the memo this time


def memory_text(lines: int, first: int = 0) -> str:
    head = "# Observational memory\nIds in brackets can be recalled.\n\n## Observations\n"
    line = "- [{:012x}] user chose option {} for the queue.\n"
    body = "".join(line.format(n, n) for n in range(first, lines))
    return head + "### 2026-01-10\n" + body


def test_long_text_counts_as_count_does() -> None:
    text = memory_text(600)
    assert len(text) > 3 * TOKEN_CHUNK_CHARS
    est, _ = counting()
    assert est.count_lines(text) == ESTIMATOR.count(text)
    blind = ("x" * 5000 + "\n") * 6  # blind chunk cuts: still exactly what count says
    assert est.count_lines(blind) == ESTIMATOR.count(blind)


def test_a_repeated_text_is_encoded_once_and_a_changed_one_only_where_it_changed() -> None:
    est, seen = counting()
    text = memory_text(40)
    est.count_lines(text)
    encoded = sum(map(len, seen))
    assert encoded == len(text)
    seen.clear()
    est.count_lines(text)
    assert seen == []  # every line was counted before
    # The pool moved on: the oldest observation dropped, a new one recorded.
    est.count_lines(memory_text(41, first=1))
    assert seen == [f"- [{40:012x}] user chose option 40 for the queue.\n"]


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "LINE_MEMO_MAX_CHARS", 500)
    est, _ = counting()
    for n in range(50):
        text = memory_text(n + 3, first=n)
        assert est.count_lines(text) == ESTIMATOR.count(text)
        memo = est._line_memo
        assert memo is not None and memo.chars <= 500
        assert memo.chars == sum(map(len, memo.counts))


def test_only_the_default_encoding_memoises() -> None:
    assert ESTIMATOR._line_memo is not None
    # A caller's own estimator (its encoding's pieces unknown) counts the whole text.
    seen: list[str] = []
    own = TokenEstimator("mine", lambda text: seen.append(text) or text.split())
    own.count_lines("a b\nc d\n")
    own.count_lines("a b\nc d\n")
    assert seen == ["a b\nc d\n", "a b\nc d\n"]
    heuristic = get_estimator(tokens.HEURISTIC_ENCODING)
    assert heuristic.count_lines("abcde\nfg") == heuristic.count("abcde\nfg") == 2
