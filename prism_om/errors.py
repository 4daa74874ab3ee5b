"""Every error prism_om raises on purpose.

The hierarchy::

    PrismMemoryError
    ├── InvalidInputError            bad input rejected before any side effect
    │   ├── InvalidEntryError        an entry that does not match the wire format
    │   ├── InvalidIdError           a malformed entry, memory or scope id
    │   ├── InvalidSessionIdError    a session id that is not a safe name
    │   ├── AmbiguousInputError      a request that names two things, or none
    │   ├── PageTooLargeError        a page limit above its hard cap
    │   └── LimitExceededError       any other cap of the specification
    │       ├── EntryTooLargeError   an entry above MAX_ENTRY_BYTES serialised
    │       └── MemoryRecordTooLargeError  a record citing more ids than its cap
    │                                (also a MemoryRecordError)
    ├── StoreRuleError               an append or move the tree does not allow
    │   ├── DuplicateEntryError      the entry id already exists in the store
    │   ├── UnknownParentError       the parent id is in no session of the store
    │   ├── SessionMismatchError     the entry or parent belongs to another session
    │   ├── RootExistsError          a second root for one session
    │   ├── EntryNotFoundError       a leaf or cursor that is not in the session
    │   ├── MemoryRecordError        an om.* record that the branch does not support
    │   └── StaleCoverageError       a worker's records, after another worker recorded
    ├── BranchMismatchError          an append that did not land on the session's leaf
    ├── ScopeDeniedError             a shared scope read that was not granted
    ├── StoreError                   the storage underneath failed
    │   ├── CorruptStoreError        unreadable file, page or row
    │   ├── StoreBusyError           the store stayed locked past its timeout
    │   ├── StoreClosedError         use after close()
    │   ├── StoreNotFoundError       opening a store that does not exist, without create
    │   └── ReadOnlyStoreError       a write to a store opened read-only
    └── WorkerError                  a memory worker broke one of its limits

``RemovedSettingError`` (a removed pre-0.1.5 settings key) derives from both
``PrismMemoryError`` and ``TypeError``, as the specification asks for a ``TypeError``.
"""

from __future__ import annotations

__all__ = [
    "AmbiguousInputError",
    "BranchMismatchError",
    "CorruptStoreError",
    "DuplicateEntryError",
    "EntryNotFoundError",
    "EntryTooLargeError",
    "InvalidEntryError",
    "InvalidIdError",
    "InvalidInputError",
    "InvalidSessionIdError",
    "LimitExceededError",
    "MemoryRecordError",
    "MemoryRecordTooLargeError",
    "PageTooLargeError",
    "PrismMemoryError",
    "ReadOnlyStoreError",
    "RemovedSettingError",
    "RootExistsError",
    "ScopeDeniedError",
    "StaleCoverageError",
    "SessionMismatchError",
    "StoreBusyError",
    "StoreClosedError",
    "StoreError",
    "StoreNotFoundError",
    "StoreRuleError",
    "UnknownParentError",
    "WorkerError",
]


class PrismMemoryError(Exception):
    """Root of every error raised by prism_om.

    Besides its message, an error carries what it is about, as httpx's errors carry
    their ``request``: ``entry_id``, ``session_id``, ``memory_id`` and ``url`` (the
    store's), each None when it does not apply or is not known where it was raised.
    """

    def __init__(
        self,
        *args: object,
        entry_id: str | None = None,
        session_id: str | None = None,
        memory_id: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(*args)
        self.entry_id = entry_id
        self.session_id = session_id
        self.memory_id = memory_id
        self.url = url


class InvalidInputError(PrismMemoryError, ValueError):
    """Input rejected before any side effect."""


class InvalidEntryError(InvalidInputError):
    """An entry that does not match the wire format."""


class InvalidIdError(InvalidInputError):
    """A malformed entry, memory or scope id."""


class InvalidSessionIdError(InvalidInputError):
    """A session id that is not a safe, portable name."""


class AmbiguousInputError(InvalidInputError):
    """A request that names two alternatives at once, or neither."""


class PageTooLargeError(InvalidInputError):
    """A page limit above the hard cap."""


class LimitExceededError(InvalidInputError):
    """A cap of the specification would be exceeded."""


class StoreRuleError(PrismMemoryError):
    """An append or leaf move that the session tree does not allow."""


class DuplicateEntryError(StoreRuleError):
    """The entry id already exists somewhere in the store."""


class UnknownParentError(StoreRuleError):
    """The parent id names no entry of the store."""


class SessionMismatchError(StoreRuleError):
    """An entry, parent, leaf or caller that belongs to another session."""


class RootExistsError(StoreRuleError):
    """The session already has its one root entry."""


class EntryNotFoundError(StoreRuleError, LookupError):
    """A leaf or cursor id that is not an entry of the session."""


class MemoryRecordError(StoreRuleError):
    """An ``om.*`` record whose ids or sources the branch does not support."""


class StaleCoverageError(StoreRuleError):
    """``append_at_leaf(expected_memory_head=...)`` found a newer memory record: another
    worker already recorded over this coverage, so nothing was stored."""


class BranchMismatchError(PrismMemoryError):
    """A memory append that did not land at the session's leaf."""


class ScopeDeniedError(PrismMemoryError):
    """A shared-scope access that no grant allows."""


class StoreError(PrismMemoryError):
    """The storage underneath the store failed."""


class CorruptStoreError(StoreError):
    """A file, page or row that can no longer be read."""


class StoreBusyError(StoreError):
    """The store stayed locked by another writer past its timeout."""


class StoreClosedError(StoreError):
    """The store was used after ``close()``."""


class WorkerError(PrismMemoryError):
    """A memory worker run broke one of its limits."""


class RemovedSettingError(PrismMemoryError, TypeError):
    """A settings key removed in 0.1.5; the message names its replacement."""


class StoreNotFoundError(StoreError, LookupError):
    """No store at the path, and the caller asked not to create one (reads never do)."""


class ReadOnlyStoreError(StoreError):
    """A write to a store that was opened read-only."""


class EntryTooLargeError(LimitExceededError):
    """An entry whose serialised wire JSON is above ``MAX_ENTRY_BYTES``; nothing is stored."""


class MemoryRecordTooLargeError(LimitExceededError, MemoryRecordError):
    """A memory record citing more sources or observations than its hard cap."""
