"""Chunked token counting: linear and bounded on pathological text (issue 13, item 15)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import prism_om.tokens as tokens
from prism_om.tokens import TOKEN_CHUNK_CHARS, TokenEstimator, get_estimator

ESTIMATOR = get_estimator()
pytestmark = pytest.mark.skipif(
    ESTIMATOR.name == tokens.HEURISTIC_ENCODING, reason="no tiktoken encoding loadable"
)

# Words never contain whitespace; every other separator is one plain space, so a safe
# cut point (a single space between two non-space characters) occurs every few words.
WORDS = st.text(
    st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), min_size=1, max_size=8
)
SEPARATORS = st.sampled_from([" ", "  ", "\n", "\n\n", ", ", ". ", "\t", " - "])


@st.composite
def ordinary_text(draw: st.DrawFn) -> str:
    words = draw(st.lists(WORDS, min_size=1, max_size=120))
    parts: list[str] = []
    for i, word in enumerate(words):
        parts.append(word)
        parts.append(" " if i % 2 == 0 else draw(SEPARATORS))
    return "".join(parts)


def whole_count(text: str) -> int:
    return len(ESTIMATOR._encode(text))


@settings(max_examples=150, deadline=None)
@given(ordinary_text())
def test_chunked_count_equals_the_whole_text_count(text: str) -> None:
    # Tiny chunks, so that ordinary text is cut many times.
    chunked = sum(whole_count(chunk) for chunk in tokens._token_chunks(text, 40))
    assert chunked == whole_count(text)
    assert "".join(tokens._token_chunks(text, 40)) == text


def test_long_prose_counts_as_before() -> None:
    text = " ".join(f"word{i % 97}, and more text; (n={i})" for i in range(20_000))
    assert len(text) > 20 * TOKEN_CHUNK_CHARS
    assert ESTIMATOR.count(text) == whole_count(text)


@pytest.mark.parametrize(
    "text",
    ["a" * 300_000, "ab1" * 100_000, ("x" * 20_000 + " ") * 15, "\u4e00" * 200_000],
    ids=["one-letter-run", "mixed-run", "long-words", "cjk-run"],
)
def test_pathological_text_is_encoded_in_bounded_chunks(text: str) -> None:
    """Each encoder call sees at most TOKEN_CHUNK_CHARS characters, and every character
    is encoded once: the work is linear however long the run without spaces."""
    seen: list[int] = []

    def encode(chunk: str) -> Any:
        seen.append(len(chunk))
        return ESTIMATOR._encode(chunk)

    counting = TokenEstimator(ESTIMATOR.name, encode)
    count = counting.count(text)
    assert max(seen) <= TOKEN_CHUNK_CHARS
    assert sum(seen) == len(text)
    # Blind cuts may move a token boundary: at most a token or so per cut.
    assert abs(count - whole_count(text)) <= len(seen)


@settings(max_examples=40, deadline=None)
@given(st.lists(ordinary_text(), max_size=40))
def test_count_many_counts_each_text(texts: list[str]) -> None:
    # Made large enough to go to the threads, then counted text by text for comparison.
    batch = [t * 40 for t in texts]
    assert ESTIMATOR.count_many(batch) == [ESTIMATOR.count(t) for t in batch]


def test_a_large_batch_is_encoded_on_the_token_threads() -> None:
    import threading

    seen: set[str] = set()

    def encode(text: str) -> Any:
        seen.add(threading.current_thread().name)
        return ESTIMATOR._encode(text)

    estimator = TokenEstimator(ESTIMATOR.name, encode)
    texts = ["the budget review moved to thursday afternoon " * 60] * 16
    assert sum(map(len, texts)) >= tokens.PARALLEL_MIN_CHARS
    assert estimator.count_many(texts) == [ESTIMATOR.count(t) for t in texts]
    if tokens._POOL_WORKERS > 1:
        assert seen and all(name.startswith("prism-om-tokens") for name in seen)
    # A handful of short messages is counted in place: a thread hand-off would cost more.
    seen.clear()
    assert estimator.count_many(["hi", "there"]) == [1, 1]
    assert seen == {threading.current_thread().name}


def test_counting_releases_the_gil_as_a_known_releasing_call_does() -> None:
    # What count_many's threads rest on. A Python thread counts while the main thread
    # makes one long call; it can run only while that call has released the GIL. The
    # controls have known answers: sha256 of a large buffer releases it, sum() over a
    # range holds it (the counter then moves only at the call's edges, within a switch
    # interval). Each call lasts ~the same wall time, so a busy machine slows the
    # counter alike in all three; the test compares counts, not times.
    import hashlib
    import threading
    import time

    counter = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            counter[0] += 1

    text = "the budget review moved to thursday afternoon, said Dana. " * 80_000
    started = time.perf_counter()
    ESTIMATOR.count(text)
    target = max(time.perf_counter() - started, 0.05)

    def scaled(call: Any, size: int) -> int:
        # The size at which ``call(size)`` takes about ``target`` seconds (the best of
        # three timings: a busy moment must not make the control short).
        took = []
        for _ in range(3):
            started = time.perf_counter()
            call(size)
            took.append(time.perf_counter() - started)
        return max(size, int(size * target / max(min(took), 1e-4)))

    sample = b"x" * (1 << 22)
    buffer = b"x" * scaled(lambda n: hashlib.sha256(memoryview(sample)[:n]).digest(), 1 << 22)
    span = scaled(lambda n: sum(range(n)), 1 << 20)
    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        progress: dict[str, int] = {}
        for name, call in (
            ("holds", lambda: sum(range(span))),
            ("releases", lambda: hashlib.sha256(buffer).digest()),
            ("count", lambda: ESTIMATOR.count(text)),
        ):
            before = counter[0]
            call()
            progress[name] = counter[0] - before
    finally:
        stop.set()
        thread.join()
    floor = 5 * max(progress["holds"], 1)
    # The method tells the two controls apart, and counting is on the releasing side.
    assert progress["releases"] > floor, progress
    assert progress["count"] > floor, progress
