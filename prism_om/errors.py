"""Every error prism_om raises on purpose.

The hierarchy::

    PrismMemoryError
    ├── InvalidInputError            bad input rejected before any side effect
    │   ├── InvalidEntryError        an entry that does not match the wire format
    │   │   └── TombstoneRecordError a tombstone session entry or record that breaks
    │   │                            the tombstone shape (``field``)
    │   ├── InvalidIdError           a malformed entry, memory or scope id
    │   ├── InvalidSessionIdError    a session id that is not a safe name
    │   ├── AmbiguousInputError      a request that names two things, or none
    │   ├── PageTooLargeError        a page limit above its hard cap
    │   ├── LimitExceededError       any other cap of the specification
    │   │   ├── EntryTooLargeError   an entry above MAX_ENTRY_BYTES serialised
    │   │   └── MemoryRecordTooLargeError  a record citing more ids than its cap
    │   │                            (also a MemoryRecordError)
    │   ├── ImportFormatError        a transcript file an importer cannot read (path, line)
    │   │   ├── ImportTimeError      a record's time field that is no time (``field``)
    │   │   └── ImportOrderError     import --append: a message dated before the leaf
    │   ├── SessionExistsError       an import into a session that already has entries
    │   ├── ToolInputError*          a worker tool call its input does not support
    │   ├── CliUsageError*           a command line the CLI refuses (exit code 2)
    │   └── InspectParamError*       a query parameter the inspect page refuses (HTTP 400)
    ├── StoreRuleError               an append or move the tree does not allow
    │   ├── DuplicateEntryError      the entry id already exists in the store
    │   ├── UnknownParentError       the parent id is in no session of the store
    │   ├── SessionMismatchError     the entry or parent belongs to another session
    │   ├── RootExistsError          a second root for one session
    │   ├── EntryNotFoundError       a leaf or cursor that is not in the session
    │   ├── MemoryRecordError        an om.* record that the branch does not support
    │   ├── StaleCoverageError       a worker's records, after another worker recorded
    │   ├── CopyConflictError        a copy's target session that differs from its source
    │   └── SessionNotFoundError     deleting a session the store does not hold
    ├── BranchMismatchError          an append that did not land on the session's leaf
    ├── ScopeDeniedError             a shared scope read that was not granted
    ├── StoreError                   the storage underneath failed
    │   ├── CorruptStoreError        unreadable file, page or row
    │   ├── StoreBusyError           the store stayed locked past its timeout
    │   ├── StoreClosedError         use after close()
    │   ├── StoreNotFoundError       opening a store that does not exist, without create
    │   ├── StoreUnreachableError    a store's server that cannot be connected to (reason)
    │   ├── ReadOnlyStoreError       a write to a store opened read-only
    │   ├── StoreVersionError        a store of a schema version this open cannot use
    │   │                            (``version``, ``supported``): newer than the code,
    │   │                            or older and opened read-only (how to migrate it)
    │   └── CopyVerificationError    a copy whose target counts differ from the source
    ├── WorkerError                  a memory worker run failed
    │   ├── WorkerRunError           a broken worker limit or failing part (``reason``)
    │   └── WorkerRunFailed*         a CLI flush whose worker failed (exit code 1)
    ├── ProviderError*               a model call failed (``status``, ``provider_id``)
    │   └── ScriptExhaustedError*    a scripted provider asked for one turn too many
    └── MalformedTombstoneWarning    (also a ``UserWarning``) a stored tombstone entry
                                     (or session) that a read skipped, named by its id

A ``*`` marks a class defined beside the code that raises it, not here:
``ProviderError`` and ``ScriptExhaustedError`` in ``prism_om.providers`` (the message is
redacted with the memory redaction, a layer above this module), ``ToolInputError`` in
``prism_om.workers``, ``CliUsageError`` and ``WorkerRunFailed`` in ``prism_om.cli``,
``InspectParamError`` in ``prism_om.inspect.params``.
``prism_om`` exports every class a library user catches, ``ProviderError`` included.

Each error carries what it is about as attributes (None when unknown where it was
raised): ``entry_id``, ``session_id``, ``memory_id`` and the store's ``url``; an
``InvalidInputError`` also ``field``, the argument or entry field it refused.
``RemovedSettingError`` (a removed pre-0.1.5 settings key) derives from both
``PrismMemoryError`` and ``TypeError``, as the specification asks for a ``TypeError``.
"""

from __future__ import annotations

from typing import Self

__all__ = [
    "AmbiguousInputError",
    "BranchMismatchError",
    "CopyConflictError",
    "CopyVerificationError",
    "CorruptStoreError",
    "DuplicateEntryError",
    "EntryNotFoundError",
    "EntryTooLargeError",
    "ImportFormatError",
    "ImportOrderError",
    "ImportTimeError",
    "InvalidEntryError",
    "InvalidIdError",
    "InvalidInputError",
    "InvalidSessionIdError",
    "LimitExceededError",
    "MalformedTombstoneWarning",
    "MemoryRecordError",
    "MemoryRecordTooLargeError",
    "PageTooLargeError",
    "PrismMemoryError",
    "ReadOnlyStoreError",
    "RemovedSettingError",
    "RootExistsError",
    "ScopeDeniedError",
    "StaleCoverageError",
    "SessionExistsError",
    "SessionMismatchError",
    "SessionNotFoundError",
    "StoreBusyError",
    "StoreClosedError",
    "StoreError",
    "StoreNotFoundError",
    "StoreRuleError",
    "StoreUnreachableError",
    "StoreVersionError",
    "TombstoneRecordError",
    "UnknownParentError",
    "WorkerError",
    "WorkerRunError",
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

    def add_context(
        self,
        *,
        entry_id: str | None = None,
        session_id: str | None = None,
        memory_id: str | None = None,
        url: str | None = None,
    ) -> Self:
        """Fill in the attributes still None (a layer that knows more adds it); returns self.

        For a caller that catches an error from a pure function (which knows no store) and
        re-raises it with the session and the store it was about.
        """
        if self.entry_id is None:
            self.entry_id = entry_id
        if self.session_id is None:
            self.session_id = session_id
        if self.memory_id is None:
            self.memory_id = memory_id
        if self.url is None:
            self.url = url
        return self


class InvalidInputError(PrismMemoryError, ValueError):
    """Input rejected before any side effect.

    ``field`` names what was refused when it is known: a call's argument (``leaf_id``,
    ``count``, ``memory_ids[3]``) or a field of an entry (``id``, ``data.type``).
    """

    field: str | None = None

    def __init__(
        self,
        *args: object,
        field: str | None = None,
        entry_id: str | None = None,
        session_id: str | None = None,
        memory_id: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(
            *args, entry_id=entry_id, session_id=session_id, memory_id=memory_id, url=url
        )
        # Only when given: ImportTimeError sets its own field before calling up.
        if field is not None:
            self.field = field


class InvalidEntryError(InvalidInputError):
    """An entry that does not match the wire format."""


class TombstoneRecordError(InvalidEntryError):
    """An entry of a ``tombstones.<scope>`` session that is no well-formed tombstone
    record, or a tombstone record outside such a session (``prism_om.core.tombstones``);
    ``field`` names the part that is wrong (``data.ids``, ``data.reason``...)."""

    def __init__(
        self,
        *args: object,
        field: str,
        entry_id: str | None = None,
        session_id: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(*args, entry_id=entry_id, session_id=session_id, url=url)
        self.field = field

    def __reduce__(self) -> tuple[object, ...]:
        # ``field`` is keyword-only: rebuild from the attributes when unpickled.
        return (_rebuild_tombstone_record_error, (self.args, self.field), self.__dict__)


def _rebuild_tombstone_record_error(args: tuple[object, ...], field: str) -> TombstoneRecordError:
    return TombstoneRecordError(*args, field=field)


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


class CopyConflictError(StoreRuleError):
    """A copy's target already holds the session with entries the source does not have.

    ``prism-om copy`` completes a target session that holds a prefix of the source's
    entries; anything else (other entries, other bodies, more entries) it refuses,
    naming the session, and writes nothing to it.
    """


class SessionNotFoundError(StoreRuleError, LookupError):
    """``delete_session`` named a session with no entries in the store; nothing changed."""


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


class CopyVerificationError(StoreError):
    """After a copy, the target's counts (entries, leaves, leaf, ledger) differ from the source."""


class StoreNotFoundError(StoreError, LookupError):
    """No store at the path, and the caller asked not to create one (reads never do)."""


class StoreUnreachableError(StoreError):
    """The store's server cannot be connected to: its message gives the server's reason."""


class ReadOnlyStoreError(StoreError):
    """A write to a store that was opened read-only."""


class StoreVersionError(StoreError):
    """A store whose schema version this open cannot use: newer than this prism_om, older
    with no migration to the current version, or older and opened read-only (a read-only
    open never migrates, and reads only the current shape; the message says how to
    migrate it). ``version`` is the store's, ``supported`` this prism_om's."""

    def __init__(self, *args: object, version: int, supported: int, url: str | None = None) -> None:
        super().__init__(*args, url=url)
        self.version = version
        self.supported = supported


class EntryTooLargeError(LimitExceededError):
    """An entry whose serialised wire JSON is above ``MAX_ENTRY_BYTES``; nothing is stored."""


class MemoryRecordTooLargeError(LimitExceededError, MemoryRecordError):
    """A memory record citing more sources or observations than its hard cap."""


class WorkerRunError(WorkerError):
    """A worker run failed; ``reason`` names the broken limit or the failing part.

    The message has known secrets redacted and is bounded by ``max_worker_error_bytes``.
    """

    def __init__(self, reason: str, message: str, *, session_id: str | None = None) -> None:
        super().__init__(message, session_id=session_id)
        self.reason = reason
        self.message = message

    def __reduce__(self) -> tuple[object, ...]:
        # Two positional arguments, but ``args`` holds one: rebuild from the attributes.
        return (_rebuild_worker_run_error, (self.reason, self.message), self.__dict__)


def _rebuild_worker_run_error(reason: str, message: str) -> WorkerRunError:
    return WorkerRunError(reason, message)


class ImportFormatError(InvalidInputError):
    """A file that is not a transcript of the expected format; nothing was written.

    ``str(error)`` reads ``"<path>: line 7: <reason>"`` for JSON lines, ``"<path>: index 3:
    <reason>"`` for an item of a JSON array, or ``"<path>: <reason>"`` for the file as a
    whole. The parts are kept as attributes (``path``, ``reason``, ``line``, ``index``, and
    ``entry_id`` and ``session_id`` when known) for callers that render their own message.
    """

    def __init__(
        self,
        path: str,
        reason: str,
        *,
        line: int | None = None,
        index: int | None = None,
        entry_id: str | None = None,
        session_id: str | None = None,
    ) -> None:
        self.path = path
        self.reason = reason
        self.line = line
        self.index = index
        if line is not None:
            where = f"{path}: line {line}"
        elif index is not None:
            where = f"{path}: index {index}"
        else:
            where = path
        super().__init__(f"{where}: {reason}", entry_id=entry_id, session_id=session_id)

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only attributes would otherwise be lost when the error is pickled.
        where = (self.path, self.reason, self.line, self.index)
        return (_rebuild_import_format_error, where, self.__dict__)


def _rebuild_import_format_error(
    path: str, reason: str, line: int | None, index: int | None
) -> ImportFormatError:
    return ImportFormatError(path, reason, line=line, index=index)


class ImportTimeError(ImportFormatError):
    """A record whose time field (``field``: ``timestamp``, ``created_at``...) holds
    something that is neither ISO 8601 nor an epoch number; the message names the line or
    index and the field."""

    def __init__(
        self,
        path: str,
        reason: str,
        *,
        field: str,
        line: int | None = None,
        index: int | None = None,
        session_id: str | None = None,
    ) -> None:
        self.field = field
        super().__init__(path, reason, line=line, index=index, session_id=session_id)

    def __reduce__(self) -> tuple[object, ...]:
        where = (self.path, self.reason, self.field, self.line, self.index)
        return (_rebuild_import_time_error, where, self.__dict__)


def _rebuild_import_time_error(
    path: str, reason: str, field: str, line: int | None, index: int | None
) -> ImportTimeError:
    return ImportTimeError(path, reason, field=field, line=line, index=index)


class ImportOrderError(ImportFormatError):
    """``import --append``: a message of the file is dated before the session's leaf.

    Appending it after the leaf would put it out of time order, so the import refuses
    (unless ``allow_earlier``) and names the first such message (``entry_id``, its line or
    index) and the leaf (``leaf_id``, ``leaf_time``)."""

    def __init__(
        self,
        path: str,
        reason: str,
        *,
        leaf_id: str,
        leaf_time: str,
        line: int | None = None,
        index: int | None = None,
        entry_id: str | None = None,
        session_id: str | None = None,
    ) -> None:
        self.leaf_id = leaf_id
        self.leaf_time = leaf_time
        super().__init__(
            path, reason, line=line, index=index, entry_id=entry_id, session_id=session_id
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_import_order_error, (self.path, self.reason), self.__dict__)


def _rebuild_import_order_error(path: str, reason: str) -> ImportOrderError:
    return ImportOrderError(path, reason, leaf_id="", leaf_time="")


class SessionExistsError(InvalidInputError):
    """An explicitly named target session that already has entries: an import never mixes."""


class MalformedTombstoneWarning(PrismMemoryError, UserWarning):
    """Warned (not raised) when a read skips an entry of a tombstone session that is no
    well-formed tombstone record: a store written by hand or by a version without the
    append rule stays readable, and the entry withholds nothing. ``entry_id`` and
    ``session_id`` name it (``entry_id`` is None for a whole ``tombstones.*`` session
    skipped because no valid scope name follows the prefix); a host that turns warnings
    into errors catches it as a ``PrismMemoryError``."""
