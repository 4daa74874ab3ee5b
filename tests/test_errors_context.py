"""Errors join one tree under PrismMemoryError and carry what they are about as attributes."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
from collections.abc import Callable
from pathlib import Path

import pytest

import prism_om
from prism_om.cli.app import _describe, _exit_code
from prism_om.cli.common import EXIT_FAILURE, EXIT_USAGE, CliUsageError, require_session
from prism_om.cli.memory import WorkerRunFailed
from prism_om.core.records import REFLECTIONS_RECORDED
from prism_om.entries import (
    SessionEntry,
    check_entry_size,
    custom_entry,
    entry_from_wire,
    message_entry,
)
from prism_om.errors import (
    BranchMismatchError,
    EntryNotFoundError,
    EntryTooLargeError,
    ImportFormatError,
    InvalidEntryError,
    InvalidIdError,
    InvalidInputError,
    MemoryRecordError,
    PrismMemoryError,
    ScopeDeniedError,
    SessionExistsError,
    SessionMismatchError,
    WorkerError,
    WorkerRunError,
)
from prism_om.importers import import_conversation, parse_conversation_bytes
from prism_om.observational_memory import (
    create_recall_memory_tool,
    create_work_scope_controller,
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.providers import ProviderError, ProviderRequest, ScriptedProvider
from prism_om.providers.scripted import ScriptExhaustedError
from prism_om.session import Session
from prism_om.stores.base import SessionStore
from prism_om.stores.memory import MemoryStore
from prism_om.workers import Model, OfflineMemoryProvider, create_observational_memory_runtime

# Exceptions that are deliberately not prism_om errors.
INTERNAL = {
    # The SSE decoder's own error; openai_compat turns it into a ProviderError.
    "prism_om.providers._sse.SSEError",
    # The test kit's injected failure: a test must tell it apart from the store's own.
    "prism_om.testing.faults.InjectedFault",
    # The test kit's cluster helper: no PostgreSQL here (the tests turn it into a skip).
    "prism_om.testing.postgres_cluster.PostgresUnavailableError",
    # SQLite's point read signalling "redo this with a hop": caught inside the store.
    "prism_om.stores.sqlite.loop_reads.NotAPoint",
    # A search on SQLite's reader thread signalling "index first, off this thread".
    "prism_om.stores.sqlite.thread_reads._IndexFirst",
    # A lockless JSONL reader's "the files moved under me, read again": caught inside.
    "prism_om.stores.jsonl.files._FilesMoved",
}


def _defined_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(prism_om.__path__, "prism_om."):
        if info.name.endswith("__main__"):
            continue  # running it is the CLI, not a definition
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == info.name:
                found[f"{info.name}.{cls.__qualname__}"] = cls
    return found


def test_every_exception_class_of_prism_om_is_a_prism_memory_error() -> None:
    found = _defined_exceptions()
    outside = sorted(
        name
        for name, cls in found.items()
        if not issubclass(cls, PrismMemoryError) and name not in INTERNAL
    )
    assert outside == []
    assert set(found) >= INTERNAL  # the list names classes that still exist
    for name in (
        "prism_om.cli.common.CliUsageError",
        "prism_om.cli.memory.WorkerRunFailed",
        "prism_om.providers.base.ProviderError",
        "prism_om.errors.WorkerRunError",
        "prism_om.errors.ImportFormatError",
    ):
        assert name in found


def test_every_class_is_drawn_in_the_errors_docstring_tree() -> None:
    import prism_om.errors

    tree = prism_om.errors.__doc__ or ""
    missing = sorted(
        cls.__name__
        for name, cls in _defined_exceptions().items()
        if name not in INTERNAL and cls.__name__ not in tree
    )
    assert missing == []


def test_the_errors_a_user_catches_are_exported_from_the_package() -> None:
    for cls in (ProviderError, WorkerRunError, ImportFormatError, SessionExistsError):
        assert getattr(prism_om, cls.__name__) is cls
        assert cls.__name__ in prism_om.__all__
    assert issubclass(ScriptExhaustedError, ProviderError)
    assert issubclass(ProviderError, PrismMemoryError)
    assert issubclass(WorkerRunError, WorkerError)


# -- the CLI's two errors keep their exit codes ------------------------------------------------


def test_cli_usage_error_is_invalid_input_and_exits_2() -> None:
    error = CliUsageError("--db is wrong", url="sqlite:x.db")
    assert isinstance(error, InvalidInputError) and isinstance(error, PrismMemoryError)
    assert (_exit_code(error), _describe(error), error.url) == (
        EXIT_USAGE,
        "--db is wrong",
        "sqlite:x.db",
    )


def test_worker_run_failed_is_a_worker_error_and_exits_1() -> None:
    error = WorkerRunFailed("a memory worker failed: boom", session_id="s1")
    assert isinstance(error, WorkerError)
    assert (_exit_code(error), _describe(error), error.session_id) == (
        EXIT_FAILURE,
        "a memory worker failed: boom",
        "s1",
    )


async def test_cli_missing_session_names_the_session_and_the_store() -> None:
    async with MemoryStore() as store:
        with pytest.raises(CliUsageError) as caught:
            await require_session(store, "s9")
    assert (caught.value.session_id, caught.value.url) == ("s9", store.url)


# -- memory ids -----------------------------------------------------------------------------


async def test_bad_memory_id_recall_carries_the_id(store: SessionStore) -> None:
    with pytest.raises(InvalidIdError) as caught:
        recall_observational_memory([], "NOT-HEX")
    assert caught.value.memory_id == "NOT-HEX"
    with pytest.raises(InvalidIdError) as caught:
        await recall_observational_memory(store, "abc", session_id="s1")
    assert caught.value.memory_id == "abc"


async def test_a_reflection_over_an_unknown_observation_names_it_and_its_entry(
    store: SessionStore,
) -> None:
    root = message_entry("s1", "user", "hello")
    await store.append(root)
    record = custom_entry(
        "s1",
        {
            "type": REFLECTIONS_RECORDED,
            "reflections": [{"id": "a" * 12, "text": "r", "observationIds": ["b" * 12]}],
        },
        parent_id=root.id,
    )
    with pytest.raises(MemoryRecordError) as caught:
        await store.append(record)
    error = caught.value
    assert (error.memory_id, error.entry_id, error.session_id) == ("b" * 12, record.id, "s1")


# -- sessions -------------------------------------------------------------------------------


async def test_wrong_session_recall_carries_the_session(store: SessionStore) -> None:
    await store.append(message_entry("s1", "user", "hello"))
    tool = create_recall_memory_tool(store=store)
    with pytest.raises(SessionMismatchError) as caught:
        await tool.handler({"id": "a" * 12}, session_id="s2")
    assert (caught.value.session_id, caught.value.url) == ("s2", store.url)

    mine = [message_entry("s1", "user", "hello")]
    by_callback = create_recall_memory_tool(get_entries=lambda sid: mine)
    with pytest.raises(SessionMismatchError) as caught:
        await by_callback.handler({"id": "a" * 12}, session_id="s2")
    assert (caught.value.session_id, caught.value.entry_id) == ("s2", mine[0].id)


async def test_scope_denied_carries_the_calling_session() -> None:
    store = MemoryStore()
    owner = Session(store, "owner")
    other = Session(store, "other")
    await owner.append_message("user", "hello")
    await other.append_message("user", "hello")
    opened = create_work_scope_controller(session=owner, append_entry=owner.append)
    await opened.open("docs", kind="task")
    stranger = create_work_scope_controller(session=other, append_entry=other.append)
    with pytest.raises(ScopeDeniedError) as caught:
        await stranger.grant("docs", ["owner"])
    assert caught.value.session_id == "other"
    await store.close()


# -- entries --------------------------------------------------------------------------------


def test_invalid_entry_carries_its_id_and_session() -> None:
    wire = message_entry("s1", "user", "hello").to_wire()
    wire["timestamp"] = "yesterday"
    with pytest.raises(InvalidEntryError) as caught:
        entry_from_wire(wire)
    assert (caught.value.entry_id, caught.value.session_id) == (wire["id"], "s1")


async def test_a_page_cursor_off_the_branch_carries_the_entry_id() -> None:
    entries = [message_entry("s1", "user", "hello")]
    with pytest.raises(EntryNotFoundError) as caught:
        recall_observational_memory_branch_page(entries, cursor="gone")
    assert caught.value.entry_id == "gone"


# -- branch mismatch ------------------------------------------------------------------------


async def test_branch_mismatch_carries_session_entry_and_store() -> None:
    session = Session(MemoryStore(), "s1")
    for i in range(6):
        await session.append_message("user" if i % 2 == 0 else "assistant", f"billing step {i}")

    async def nowhere(entry: SessionEntry) -> None:
        appended.append(entry)  # never reaches the session's store

    appended: list[SessionEntry] = []
    runtime = create_observational_memory_runtime(
        session=session,
        append_entry=nowhere,
        observation={"provider": OfflineMemoryProvider()},
        session_model=Model("m1", "acme", context_window=1000, max_output_tokens=200),
    )
    with pytest.raises(BranchMismatchError) as caught:
        await runtime.flush(force=True)
    error = caught.value
    assert appended and error.entry_id == appended[0].id
    assert (error.session_id, error.url) == ("s1", session.store.url)
    await session.store.close()


# -- imports --------------------------------------------------------------------------------


def test_import_format_error_carries_path_line_entry_and_session() -> None:
    data = b'{"role": "user", "content": "a"}\n{"role": "user", "content": "x\\ud800y"}\n'
    with pytest.raises(ImportFormatError) as caught:
        parse_conversation_bytes(data, name="chat.jsonl", session_id="imp")
    error = caught.value
    assert (error.path, error.line, error.index, error.session_id) == ("chat.jsonl", 2, None, "imp")
    assert error.entry_id is not None and error.entry_id in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.path, copy.line, copy.entry_id, copy.session_id) == (
        str(error),
        "chat.jsonl",
        2,
        error.entry_id,
        "imp",
    )


async def test_an_import_into_an_existing_session_names_it(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "a"}\n')
    store = MemoryStore()
    await store.append(message_entry("work", "user", "hello"))
    with pytest.raises(SessionExistsError) as caught:
        await import_conversation(store, path, session_id="work")
    assert caught.value.session_id == "work"
    await store.close()


# -- providers and workers ------------------------------------------------------------------


async def test_provider_errors_are_prism_memory_errors_and_pickle() -> None:
    provider = ScriptedProvider([])
    request = ProviderRequest(model="m1", messages=[])
    with pytest.raises(PrismMemoryError) as caught:
        async for _ in provider.generate(request):
            pass
    assert isinstance(caught.value, ScriptExhaustedError)
    error = ProviderError("HTTP 429: slow down", status=429, provider_id="acme")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.status, copy.provider_id) == (str(error), 429, "acme")


def test_worker_run_error_pickles_with_its_reason() -> None:
    error = WorkerRunError("tool_calls", "too many tool calls", session_id="s1")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.reason, copy.session_id) == (
        WorkerRunError,
        "too many tool calls",
        "tool_calls",
        "s1",
    )


def test_an_entry_above_its_size_cap_names_the_entry_and_session() -> None:
    entry = message_entry("s1", "user", "x" * 2000)
    with pytest.raises(EntryTooLargeError) as caught:
        check_entry_size(entry, 1000)
    assert (caught.value.entry_id, caught.value.session_id) == (entry.id, "s1")


def test_bad_provider_arguments_are_invalid_input_still_value_errors() -> None:
    from prism_om.providers import ProviderMessage
    from prism_om.providers.openai_compat import OpenAICompatibleProvider

    refusals: list[Callable[[], object]] = [
        lambda: ProviderMessage(role="tool", content="x"),
        lambda: ScriptedProvider([], then="loop"),  # type: ignore[arg-type]
        lambda: OpenAICompatibleProvider(base_url="http://x", model="m", timeout=0),
    ]
    for refuse in refusals:
        with pytest.raises(InvalidInputError) as caught:
            refuse()
        assert isinstance(caught.value, ValueError)


# -- bad arguments ---------------------------------------------------------------------------


async def test_a_refused_argument_is_named_in_field_and_pickles() -> None:
    async with MemoryStore() as store:
        with pytest.raises(InvalidIdError) as caught:
            await store.entries("s", "a\x00")
    error = caught.value
    assert (error.field, error.entry_id) == ("leaf_id", "a\x00")
    assert "leaf_id" in str(error) and "NUL" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.field, copy.entry_id) == (
        InvalidIdError,
        str(error),
        "leaf_id",
        "a\x00",
    )
    # An error that names no field says None.
    assert InvalidInputError("no field").field is None


def test_an_entry_refused_for_a_field_names_it() -> None:
    with pytest.raises(InvalidEntryError) as caught:
        custom_entry("s", {"type": "host\x00note"}, entry_id="c")
    assert caught.value.field == "data.type" and caught.value.entry_id == "c"
    with pytest.raises(InvalidEntryError) as caught:
        entry_from_wire({"id": "m", "sessionId": "s", "kind": "message", "timestamp": "x"})
    assert caught.value.field == "timestamp"
