"""``CountingStore``: a store wrapper that counts the public calls made on it.

Work is counted, not timed: a test wraps the store under test, runs a turn (or an import,
or a page) and asserts how many public reads and writes it made, whatever the machine's
speed. Only calls from outside reach the wrapper, so a read that an adapter composes of
its own reads (``snapshot``, say) counts once: what a service asks for, not how the
adapter answers it.

    store = CountingStore(await open_store("sqlite:s.db"))
    with store.counting() as calls:
        await agent.run("hello")
    assert calls.reads <= 4
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from ..stores.base import SessionStore

__all__ = ["READS", "WRITES", "CallCount", "CountingStore"]

WRITES: Final = frozenset({"append", "append_many", "append_at_leaf", "checkout", "delete_session"})
"""The ``SessionStore`` methods that change a store."""

READS: Final = frozenset(
    {
        "get",
        "get_many",
        "list",
        "entries",
        "leaves",
        "leaf",
        "memory_head",
        "sessions",
        "session_summaries",
        "is_on_branch",
        "ledger",
        "live_ledger",
        "memory_subset",
        "taken_memory_ids",
        "scope_map",
        "recent_messages",
        "entries_after",
        "page_messages",
        "entry_count",
        "branch_tokens",
        "last_compaction",
        "marked_data",
        "snapshot",
    }
)
"""The ``SessionStore`` methods that read one (the public reads a service may call)."""


@dataclass
class CallCount:
    """Calls seen inside one ``counting()`` block, by method name."""

    by_name: Counter[str] = field(default_factory=Counter)

    @property
    def reads(self) -> int:
        return sum(n for name, n in self.by_name.items() if name in READS)

    @property
    def writes(self) -> int:
        return sum(n for name, n in self.by_name.items() if name in WRITES)

    def read_names(self) -> list[str]:
        """Each read made, by name, as often as it was made (sorted)."""
        return sorted(name for name, n in self.by_name.items() if name in READS for _ in range(n))


class CountingStore:
    """Forwards everything to ``inner`` and counts its public reads and writes."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.url = inner.url
        self.total = CallCount()
        self._blocks: list[CallCount] = []

    @contextlib.contextmanager
    def counting(self) -> Iterator[CallCount]:
        """The calls made while the block runs (blocks may nest)."""
        count = CallCount()
        self._blocks.append(count)
        try:
            yield count
        finally:
            self._blocks.remove(count)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name not in READS and name not in WRITES:
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.total.by_name[name] += 1
            for block in self._blocks:
                block.by_name[name] += 1
            return value(*args, **kwargs)

        return counted

    async def __aenter__(self) -> CountingStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inner.close()

    async def close(self) -> None:
        await self.inner.close()
