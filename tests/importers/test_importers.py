"""Importing OpenAI chat, pi session and native JSONL transcripts into a store."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism_om.entries import SessionEntry
from prism_om.errors import InvalidInputError
from prism_om.importers import (
    ImportFormatError,
    ImportPlan,
    SessionExistsError,
    default_session_id,
    derive_entry_id,
    import_conversation,
    parse_conversation,
    parse_conversation_bytes,
    times,
)
from prism_om.importers.pi_session import PI_ENTRY_TYPES
from prism_om.stores import open_store
from prism_om.stores.memory import MemoryStore

DATA = Path(__file__).resolve().parents[1] / "data" / "import"


@pytest.fixture(autouse=True, scope="module")
def _fixed_import_clock() -> Iterator[None]:
    """Files without times are dated back from the import time (tests/importers/
    test_import_times.py); here that time is fixed, so two parses compare equal."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(times, "import_clock", lambda: datetime(2026, 1, 5, 12, tzinfo=UTC))
        yield


FIXTURES = [
    ("openai_array.json", "openai", "openai array"),
    ("openai_tools.jsonl", "openai", "openai jsonl"),
    ("openai_object.json", "openai", "openai object"),
    ("pi_v1.jsonl", "pi", "pi v1"),
    ("pi_v2.jsonl", "pi", "pi v2"),
    ("pi_v3.jsonl", "pi", "pi v3"),
    ("native.jsonl", "native", "native"),
]


def plan_of(name: str, **kwargs: Any) -> ImportPlan:
    return parse_conversation(DATA / name, **kwargs)


def by_source_line(plan: ImportPlan, lines: int) -> list[SessionEntry]:
    """Entries in file order (one per line of a fixture with no blank lines)."""
    assert len(plan.entries) == lines
    return plan.entries


def children(plan: ImportPlan, parent: str) -> list[str]:
    return [e.id for e in plan.entries if e.parent_id == parent]


def custom_types(plan: ImportPlan) -> list[str | None]:
    return [e.custom_type for e in plan.entries if e.kind == "custom"]


class CountingStore(MemoryStore):
    """A memory store that records every batch it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        self.batches.append(len(entries))
        await super().append_many(entries)


def write(tmp_path: Path, name: str, lines: Sequence[object]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


# -- detection and shape ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "fmt", "label"), FIXTURES)
def test_detects_each_format(name: str, fmt: str, label: str) -> None:
    plan = plan_of(name)
    assert (plan.format, plan.label) == (fmt, label)


@pytest.mark.parametrize(("name", "fmt", "label"), FIXTURES)
def test_one_tree_one_root_parents_first_and_nothing_dropped(
    name: str, fmt: str, label: str
) -> None:
    plan = plan_of(name)
    # Every record of the file becomes exactly one entry.
    assert len(plan.entries) == plan.record_count
    roots = [e for e in plan.entries if e.parent_id is None]
    assert len(roots) == 1
    seen: set[str] = set()
    for entry in plan.entries:
        assert entry.session_id == plan.session_id
        assert entry.parent_id is None or entry.parent_id in seen
        assert entry.id not in seen
        seen.add(entry.id)
    assert plan.leaf_id == plan.entries[-1].id


@pytest.mark.parametrize(("name", "fmt", "label"), FIXTURES)
def test_forced_format_matches_detection(name: str, fmt: str, label: str) -> None:
    assert plan_of(name, format=fmt).entries == plan_of(name).entries


def test_a_wrong_forced_format_is_reported_with_the_line() -> None:
    with pytest.raises(ImportFormatError) as caught:
        plan_of("pi_v3.jsonl", format="openai")
    assert caught.value.line == 1
    assert "pi_v3.jsonl: line 1:" in str(caught.value)


def test_unknown_format_name_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="unknown import format 'csv'"):
        plan_of("pi_v1.jsonl", format="csv")


def test_undetectable_file_asks_for_format(tmp_path: Path) -> None:
    path = write(tmp_path, "odd.jsonl", [{"hello": "world"}, {"n": 1}])
    with pytest.raises(ImportFormatError, match="--format") as caught:
        parse_conversation(path)
    assert str(path) in str(caught.value)


def test_mixed_formats_are_ambiguous(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "mixed.jsonl",
        [{"role": "user", "content": "hi"}, {"type": "model_change", "provider": "x"}],
    )
    with pytest.raises(ImportFormatError, match=r"ambiguous.*openai at line 1.*pi at line 2"):
        parse_conversation(path)


# -- OpenAI chat -----------------------------------------------------------------------------


def test_openai_array_keeps_system_images_and_times() -> None:
    plan = plan_of("openai_array.json")
    system, user, assistant, picture, answer = by_source_line(plan, 5)
    assert system.kind == "custom"
    assert system.data == {
        "type": "import.system",
        "role": "system",
        "content": "You are a terse assistant.",
    }
    assert user.message is not None and user.message.text() == "What is the capital of France?"
    assert assistant.role == "assistant"
    assert picture.message is not None
    parts = picture.to_wire()["message"]["content"]
    assert parts[1] == {"type": "image", "url": "https://example.com/eiffel.png"}
    # created_at epoch seconds become ISO UTC, and so does an ISO time; a message
    # without a time takes the previous one plus the interval (1 s).
    assert system.timestamp == "2024-05-29T16:26:40.000Z"
    assert picture.timestamp == "2024-06-01T10:00:05.000Z"
    assert answer.timestamp == "2024-06-01T10:00:06.000Z"


def test_openai_jsonl_tool_calls_and_legacy_function() -> None:
    plan = plan_of("openai_tools.jsonl")
    # 8 records on 9 lines: the blank line 5 is skipped.
    developer, user, calls, result1, result2, answer, function, done = by_source_line(plan, 8)
    assert developer.custom_type == "import.system" and developer.data is not None
    assert developer.data["role"] == "developer"
    assert user.message is not None and user.message.name == "ana"
    assert calls.message is not None and calls.message.tool_calls is not None
    first, second = calls.message.tool_calls
    assert (first.id, first.name, first.arguments) == ("call_1", "get_weather", {"city": "Paris"})
    # Truncated JSON arguments are kept raw, not dropped.
    assert second.arguments == {"_raw": '{"city": "Rome"'}
    assert result1.message is not None and result1.message.tool_call_id == "call_1"
    assert result2.message is not None and result2.message.text() == "22C, cloudy"
    assert answer.message is not None and answer.message.tool_calls is not None
    legacy = answer.message.tool_calls[0]
    assert legacy.name == "log_answer" and legacy.arguments == {"ok": True}
    assert function.message is not None
    assert function.role == "tool" and function.message.tool_call_id == legacy.id
    assert function.message.name == "log_answer"
    assert done.message is not None and done.message.text() == "Done."
    # Entries chain in file order.
    for parent, child in zip(plan.entries, plan.entries[1:], strict=False):
        assert child.parent_id == parent.id


def test_openai_object_and_unknown_role() -> None:
    plan = plan_of("openai_object.json")
    user, assistant, critic = by_source_line(plan, 3)
    assert user.role == "user" and assistant.role == "assistant"
    assert critic.data == {"type": "import.message", "role": "critic", "content": "too short"}


def test_openai_time_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "times.jsonl",
        [
            {"role": "user", "content": "a", "timestamp": "2024-01-02T03:04:05"},
            {"role": "assistant", "content": "b", "created": 1733234567890},
            {"role": "user", "content": "c", "created_at": "2024-01-02T03:04:05+02:00"},
        ],
    )
    naive, millis, aware = parse_conversation(path).entries
    assert naive.timestamp == "2024-01-02T03:04:05.000Z"
    assert millis.timestamp == "2024-12-03T14:02:47.890Z"
    assert aware.timestamp == "2024-01-02T01:04:05.000Z"


def test_fine_tuning_layout_with_one_conversation(tmp_path: Path) -> None:
    path = write(tmp_path, "ft.jsonl", [{"messages": [{"role": "user", "content": "x"}]}])
    plan = parse_conversation(path)
    assert plan.label == "openai object" and len(plan.entries) == 1
    many = write(tmp_path, "ft2.jsonl", [{"messages": []}, {"messages": []}])
    with pytest.raises(ImportFormatError, match="holds 2 conversations"):
        parse_conversation(many)


# -- pi sessions -----------------------------------------------------------------------------


def test_pi_v1_chains_in_file_order() -> None:
    plan = plan_of("pi_v1.jsonl")
    header, user, assistant, result, model, thinking, compaction, thanks = by_source_line(plan, 8)
    assert header.custom_type == "pi.session" and header.parent_id is None
    assert header.data is not None and header.data["cwd"] == "/work/demo"
    for parent, child in zip(plan.entries, plan.entries[1:], strict=False):
        assert child.parent_id == parent.id
    assert assistant.message is not None and assistant.message.tool_calls is not None
    call = assistant.message.tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_123", "bash", {"command": "ls"})
    assert assistant.message.text() == "Running ls."
    assert result.message is not None
    assert (result.role, result.message.tool_call_id, result.message.name) == (
        "tool",
        "call_123",
        "bash",
    )
    assert model.data == {
        "type": "pi.model_change",
        "timestamp": "2024-12-03T14:05:00.000Z",
        "provider": "openai",
        "modelId": "gpt-4o",
    }
    assert thinking.custom_type == "pi.thinking_level_change"
    assert compaction.kind == "compaction"
    assert compaction.summary == "The user listed files a.txt and b.txt."
    assert compaction.data is not None
    assert compaction.data["tokensBefore"] == 5000
    # Index 3 counts the header as 0, as pi's migration does: the tool result.
    assert compaction.data["importRefs"] == {"firstKeptEntryId": result.id}
    assert thanks.timestamp == "2024-12-03T14:11:00.000Z"
    assert user.timestamp == "2024-12-03T14:00:01.000Z"


def test_pi_v2_hook_message_and_label_refs() -> None:
    plan = plan_of("pi_v2.jsonl")
    _, hello, hook, assistant, label = by_source_line(plan, 5)
    assert hook.message is not None
    assert (hook.role, hook.message.name, hook.message.text()) == (
        "user",
        "reminder",
        "Remember to run the tests.",
    )
    parts = assistant.to_wire()["message"]["content"]
    assert parts[0] == {"type": "thinking", "thinking": "The user greets me."}
    assert label.data is not None and label.data["importRefs"] == {"targetId": hello.id}
    assert label.data["targetId"] == "a1000001"  # the original field stays as written


def test_pi_v3_tree_roles_and_types() -> None:
    plan = plan_of("pi_v3.jsonl")
    entries = by_source_line(plan, 21)
    header = entries[0]
    line = {n: entries[n - 1] for n in range(1, 22)}
    # A reset (parentId null) hangs from the header root like the first entry.
    assert line[2].parent_id == header.id and line[20].parent_id == header.id
    # The fork: both the failed attempt and the branch summary follow the compaction.
    assert children(plan, line[9].id) == [line[10].id, line[11].id]
    assert line[21].parent_id == line[18].id
    assert plan.leaf_id == line[21].id

    user = line[4]
    assert user.to_wire()["message"]["content"][1] == {
        "type": "image",
        "data": "iVBORw0KGgo=",
        "mimeType": "image/png",
    }
    tool = line[6]
    assert tool.message is not None and tool.message.text() == "[tool error]\n1 failed"
    bash = line[7]
    assert bash.message is not None and bash.role == "user"
    assert bash.message.name == "bashExecution"
    assert bash.message.text() == "$ git status\nOn branch main\n(exit code 0)"
    hidden = line[8]
    assert hidden.custom_type == "pi.message"
    assert hidden.data is not None and hidden.data["message"]["command"] == "cat ~/.secret"
    compaction = line[9]
    assert compaction.kind == "compaction" and compaction.data is not None
    assert compaction.data["importedFrom"] == "pi"
    assert compaction.data["details"] == {"readFiles": ["test_app.py"], "modifiedFiles": []}
    assert compaction.data["importRefs"] == {"firstKeptEntryId": line[6].id}
    failed = line[10]
    assert failed.message is not None and failed.message.text().endswith("[error] overloaded")
    summary = line[11]
    assert summary.custom_type == "pi.branch_summary" and summary.data is not None
    assert summary.data["importRefs"] == {"fromId": line[10].id}
    custom_role = line[12]
    assert custom_role.message is not None and custom_role.message.name == "plan-mode"
    assert [line[n].custom_type for n in (13, 14, 15, 16)] == [
        "pi.custom",
        "pi.custom_message",
        "pi.label",
        "pi.session_info",
    ]
    branch_summary_role = line[17]
    assert branch_summary_role.message is not None
    assert branch_summary_role.message.name == "branchSummary"
    assert line[18].custom_type == "pi.message"  # unknown role "telepathy"
    assert line[19].custom_type == "pi.future_thing"
    assert line[19].data is not None and line[19].data["payload"] == {"x": 1}
    # Times are kept.
    assert [e.timestamp for e in entries[1:4]] == [
        "2025-03-01T12:00:00.500Z",
        "2025-03-01T12:00:00.600Z",
        "2025-03-01T12:00:01.000Z",
    ]


def test_pi_without_header_gets_a_synthetic_root(tmp_path: Path) -> None:
    lines = (DATA / "pi_v3.jsonl").read_text().splitlines()[1:4]
    path = tmp_path / "headless.jsonl"
    path.write_text("\n".join(lines) + "\n")
    plan = parse_conversation(path)
    assert plan.format == "pi" and len(plan.entries) == plan.record_count + 1
    root = plan.entries[0]
    assert root.data == {"type": "pi.session", "headerMissing": True}
    assert root.timestamp == "2025-03-01T12:00:00.500Z"


def test_pi_missing_parent_is_an_error_with_its_line(tmp_path: Path) -> None:
    lines = (DATA / "pi_v2.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace('"parentId":"a1000002"', '"parentId":"nowhere"')
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImportFormatError) as caught:
        parse_conversation(path)
    assert caught.value.line == 4
    assert "broken.jsonl: line 4: parent 'nowhere' is not an earlier entry" in str(caught.value)


def test_pi_duplicate_id_and_second_header(tmp_path: Path) -> None:
    lines = (DATA / "pi_v2.jsonl").read_text().splitlines()
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(ImportFormatError, match="line 6: entry id 'a1000001' was already used"):
        parse_conversation(dup)
    twice = tmp_path / "twice.jsonl"
    twice.write_text("\n".join([*lines, lines[0]]) + "\n")
    with pytest.raises(ImportFormatError, match="line 6: a second session header"):
        parse_conversation(twice)


# -- native ----------------------------------------------------------------------------------


def test_native_rekeys_and_keeps_payloads() -> None:
    plan = plan_of("native.jsonl")
    originals = [
        SessionEntry.model_validate_json(line)
        for line in (DATA / "native.jsonl").read_text().splitlines()
    ]
    new_id = {old.id: new.id for old, new in zip(originals, plan.entries, strict=True)}
    for old, new in zip(originals, plan.entries, strict=True):
        assert new.id != old.id and new.session_id != "demo"
        assert new.parent_id == (new_id[old.parent_id] if old.parent_id else None)
        assert (new.kind, new.timestamp) == (old.kind, old.timestamp)
        if old.kind == "message":
            assert new.message == old.message
    om = plan.entries[3]
    assert om.data is not None and om.data["type"] == "import.om-record"
    assert om.data["originalType"] == "om.observations.recorded"
    assert om.data["record"] == originals[3].data  # original ids kept verbatim, as history
    compaction = plan.entries[4]
    assert compaction.summary == "Config is in config.toml." and compaction.data is not None
    assert "memory" not in compaction.data
    assert compaction.data["importedMemory"]["type"] == "om.folded"
    assert compaction.data["throughEntryId"] == new_id["e0004"]
    assert compaction.data["keepEntryIds"] == [new_id["e0003"]]
    assert plan.entries[5].data == {"type": "app.note", "text": "bookmark"}


def test_native_import_of_an_imported_session_remaps_import_refs(tmp_path: Path) -> None:
    # Export a pi import as native JSONL, then import that file.
    plan = plan_of("pi_v2.jsonl")
    exported = tmp_path / f"{plan.session_id}.jsonl"
    exported.write_text("".join(e.to_json() + "\n" for e in plan.entries))
    again = parse_conversation(exported)
    assert again.format == "native"
    hello, label = again.entries[1], again.entries[4]
    assert label.data is not None and label.data["importRefs"] == {"targetId": hello.id}


def test_native_two_sessions_in_one_file_are_refused(tmp_path: Path) -> None:
    lines = (DATA / "native.jsonl").read_text().splitlines()
    lines[2] = lines[2].replace('"sessionId":"demo"', '"sessionId":"other"')
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImportFormatError, match="line 3: entry of session 'other'"):
        parse_conversation(path)


def test_native_invalid_entry_names_line(tmp_path: Path) -> None:
    lines = (DATA / "native.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"kind":"message"', '"kind":"custom"')
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImportFormatError, match=r"bad.jsonl: line 2: entry 'e0002'"):
        parse_conversation(path)


# -- ids, sessions, determinism ------------------------------------------------------------


@pytest.mark.parametrize(("name", "fmt", "label"), FIXTURES)
def test_parsing_is_deterministic(name: str, fmt: str, label: str, tmp_path: Path) -> None:
    first, second = plan_of(name), plan_of(name)
    assert first.session_id == second.session_id
    assert first.entries == second.entries
    # A copy under the same name (other mtime, other folder) imports identically.
    copy = tmp_path / name
    copy.write_bytes((DATA / name).read_bytes())
    assert [e.id for e in parse_conversation(copy).entries] == [e.id for e in first.entries]
    # Into another session, the same file gets other ids.
    other = plan_of(name, session_id="elsewhere")
    assert not {e.id for e in other.entries} & {e.id for e in first.entries}


def test_entry_ids_derive_from_session_and_source() -> None:
    plan = plan_of("pi_v2.jsonl", session_id="s1")
    assert plan.entries[1].id == derive_entry_id("s1", "pi:a1000001")
    assert derive_entry_id("s1", "x") != derive_entry_id("s2", "x")


def test_default_session_id_is_stem_plus_content_hash() -> None:
    digest = "3f9c01ab" + "0" * 56
    assert default_session_id("chat export (1).json", digest) == "chat-export-1-3f9c01ab"
    assert default_session_id("/tmp/x/.hidden.jsonl", digest) == "hidden-3f9c01ab"
    assert default_session_id("...", digest) == "import-3f9c01ab"
    assert default_session_id("a..b.json", digest) == "a.b-3f9c01ab"
    long = default_session_id("x" * 300 + ".jsonl", digest)
    assert len(long) == 109


def test_default_session_id_skips_taken_names() -> None:
    base = plan_of("pi_v1.jsonl").session_id
    assert base.startswith("pi_v1-")
    taken = plan_of("pi_v1.jsonl", existing_sessions={base, f"{base}-2"})
    assert taken.session_id == f"{base}-3"


async def test_round_trip_into_the_store() -> None:
    store = MemoryStore()
    plan = plan_of("pi_v3.jsonl")
    result = await import_conversation(store, DATA / "pi_v3.jsonl")
    assert (result.session_id, result.format, result.label) == (plan.session_id, "pi", "pi v3")
    assert result.entry_count == 21 and result.leaf_id == plan.leaf_id
    assert await store.list(plan.session_id) == plan.entries
    assert await store.leaf(plan.session_id) == plan.entries[-1].id
    branch = await store.entries(plan.session_id)
    assert branch[0].custom_type == "pi.session" and branch[-1].id == plan.leaf_id


async def test_reimport_makes_a_new_session_without_collisions() -> None:
    store = MemoryStore()
    for name, _, _ in FIXTURES:
        # drop_memory: native.jsonl holds memory records, which cannot stay memory.
        first = await import_conversation(store, DATA / name, drop_memory=True)
        second = await import_conversation(store, DATA / name, drop_memory=True)
        assert second.session_id == f"{first.session_id}-2"
        one, two = await store.list(first.session_id), await store.list(second.session_id)
        assert len(one) == len(two) == first.entry_count
        assert not {e.id for e in one} & {e.id for e in two}
    assert len(await store.sessions()) == 2 * len(FIXTURES)


async def test_explicit_existing_session_is_refused() -> None:
    store = MemoryStore()
    await import_conversation(store, DATA / "pi_v1.jsonl", session_id="work")
    before = await store.list("work")
    with pytest.raises(SessionExistsError, match="session 'work' already exists"):
        await import_conversation(store, DATA / "openai_array.json", session_id="work")
    assert await store.list("work") == before
    assert await store.sessions() == ["work"]


async def test_invalid_explicit_session_id_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="invalid session id"):
        await import_conversation(MemoryStore(), DATA / "pi_v1.jsonl", session_id="../x")


# -- malformed input writes nothing -------------------------------------------------------


async def test_bad_json_line_names_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(
        '{"role": "user", "content": "a"}\n'
        '{"role": "assistant", "content": "b"}\n'
        '{"role": "user", "content": \n'
        '{"role": "assistant", "content": "d"}\n'
    )
    store = CountingStore()
    with pytest.raises(ImportFormatError) as caught:
        await import_conversation(store, path)
    error = caught.value
    assert isinstance(error, InvalidInputError)
    assert (error.path, error.line) == (str(path), 3)
    assert str(error).startswith(f"{path}: line 3: invalid JSON")
    assert store.batches == [] and await store.sessions() == []


async def test_semantic_error_names_the_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "tools.jsonl",
        [{"role": "user", "content": "a"}, {"role": "tool", "content": "x"}],
    )
    store = CountingStore()
    with pytest.raises(ImportFormatError, match=r"tools.jsonl: line 2: a tool message needs"):
        await import_conversation(store, path)
    assert store.batches == []


def test_array_errors_name_the_index(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "a"}, {"role": "user"}, 7]))
    with pytest.raises(ImportFormatError) as caught:
        parse_conversation(path)
    assert caught.value.index == 2 and "chat.json: index 2: expected a JSON object" in str(
        caught.value
    )
    bad_content = tmp_path / "content.json"
    bad_content.write_text(json.dumps([{"role": "user", "content": 5}]))
    with pytest.raises(ImportFormatError, match=r"content.json: index 0: 'content' must be"):
        parse_conversation(bad_content)
    broken = tmp_path / "broken.json"
    broken.write_text('[\n{"role": "user"},\n{"role": \n]')
    with pytest.raises(ImportFormatError, match=r"broken.json: line 4: invalid JSON"):
        parse_conversation(broken)


def test_bad_timestamp_and_encoding_and_empty(tmp_path: Path) -> None:
    path = write(tmp_path, "t.jsonl", [{"role": "user", "content": "a", "timestamp": "yesterday"}])
    with pytest.raises(ImportFormatError, match=r"t.jsonl: line 1: timestamp 'yesterday'"):
        parse_conversation(path)
    raw = tmp_path / "latin.jsonl"
    raw.write_bytes(b'{"role": "user", "content": "a"}\n{"role": "user", "content": "\xe9"}\n')
    with pytest.raises(ImportFormatError, match=r"latin.jsonl: line 2: not UTF-8"):
        parse_conversation(raw)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(ImportFormatError, match=r"empty.jsonl: the file is empty"):
        parse_conversation(empty)
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(ImportFormatError, match=r"notes.txt: line 1: not JSON"):
        parse_conversation(text)


def test_utf8_bom_is_accepted() -> None:
    data = b"\xef\xbb\xbf" + (DATA / "openai_array.json").read_bytes()
    plan = parse_conversation_bytes(data, name="bom.json")
    assert len(plan.entries) == 5


# -- large files -----------------------------------------------------------------------------


def big_chat(count: int) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for n in range(count):
        if n % 4 == 2:
            lines.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call-{n}",
                            "type": "function",
                            "function": {"name": "grep", "arguments": json.dumps({"q": n})},
                        }
                    ],
                }
            )
        elif n % 4 == 3:
            lines.append({"role": "tool", "tool_call_id": f"call-{n - 1}", "content": "ok"})
        else:
            lines.append({"role": "user" if n % 4 == 0 else "assistant", "content": f"m{n}"})
    return lines


async def test_five_thousand_lines_import_in_one_batch(tmp_path: Path) -> None:
    path = write(tmp_path, "big.jsonl", big_chat(5000))
    calls: list[tuple[int, int]] = []
    store = CountingStore()
    result = await import_conversation(store, path, progress=lambda d, t: calls.append((d, t)))
    assert store.batches == [5000]
    assert result.entry_count == 5000
    assert len(await store.list(result.session_id)) == 5000
    assert await store.leaf(result.session_id) == result.leaf_id
    assert 1 <= len(calls) <= 100
    assert calls[-1] == (5000, 5000)
    assert [d for d, _ in calls] == sorted({d for d, _ in calls})


async def test_five_thousand_pi_entries_with_forks(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "big", "timestamp": "2025-01-01T00:00:00Z"}
    lines: list[dict[str, Any]] = [header]
    for n in range(5000):
        # Every tenth entry forks off the entry two back.
        parent = None if n == 0 else f"p{n - 2 if n % 10 == 0 and n > 1 else n - 1}"
        lines.append(
            {
                "type": "message",
                "id": f"p{n}",
                "parentId": parent,
                "timestamp": "2025-01-01T00:00:01Z",
                "message": {"role": "user" if n % 2 else "assistant", "content": f"m{n}"},
            }
        )
    path = write(tmp_path, "bigpi.jsonl", lines)
    calls: list[tuple[int, int]] = []
    store = CountingStore()
    result = await import_conversation(store, path, progress=lambda d, t: calls.append((d, t)))
    assert store.batches == [5001] and result.entry_count == 5001
    assert len(calls) <= 100 and calls[-1] == (5001, 5001)
    assert len(await store.leaves(result.session_id)) > 1


def test_progress_for_tiny_files_reports_each_record() -> None:
    calls: list[tuple[int, int]] = []
    plan_of("openai_object.json", progress=lambda d, t: calls.append((d, t)))
    assert calls == [(1, 3), (2, 3), (3, 3)]


# -- every adapter ---------------------------------------------------------------------------


def store_url(kind: str, tmp_path: Path) -> str:
    if kind == "memory":
        return "memory:"
    return f"jsonl:{tmp_path / 'store'}" if kind == "jsonl" else f"sqlite:{tmp_path / 'store.db'}"


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite"])
async def test_every_fixture_round_trips_through_each_adapter(kind: str, tmp_path: Path) -> None:
    url = store_url(kind, tmp_path)
    async with await open_store(url) as store:
        for name, _, _ in FIXTURES:
            plan = plan_of(name)
            result = await import_conversation(store, DATA / name, drop_memory=True)
            again = await import_conversation(store, DATA / name, drop_memory=True)
            assert (result.session_id, again.session_id) == (
                plan.session_id,
                f"{plan.session_id}-2",
            )
            assert await store.list(plan.session_id) == plan.entries
            assert await store.leaf(plan.session_id) == plan.leaf_id
        bad = write(tmp_path, "bad.jsonl", [{"role": "user", "content": "a"}, {"role": 3}])
        before = await store.sessions()
        with pytest.raises(ImportFormatError, match=r"line 2"):
            await import_conversation(store, bad)
        assert await store.sessions() == before
    if kind != "memory":
        async with await open_store(url) as reopened:
            assert len(await reopened.sessions()) == 2 * len(FIXTURES)
            first = plan_of(FIXTURES[0][0])
            assert await reopened.list(first.session_id) == first.entries


async def test_a_jsonl_store_session_file_imports_as_native(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    async with await open_store(f"jsonl:{directory}") as source_store:
        exported = await import_conversation(source_store, DATA / "pi_v3.jsonl")
        originals = await source_store.list(exported.session_id)
    session_file = directory / f"{exported.session_id}.jsonl"
    async with await open_store(f"sqlite:{tmp_path / 'copy.db'}") as target:
        result = await import_conversation(target, session_file)
        assert result.format == "native"
        copied = await target.list(result.session_id)
    assert len(copied) == len(originals)
    for old, new in zip(originals, copied, strict=True):
        assert (new.kind, new.timestamp, new.message, new.summary) == (
            old.kind,
            old.timestamp,
            old.message,
            old.summary,
        )
        assert new.id != old.id


# -- properties ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
chat_records = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "function", "x"])},
    optional={
        "content": json_values,
        "name": json_values,
        "tool_call_id": json_values,
        "tool_calls": json_values,
        "timestamp": json_values,
        "type": st.sampled_from(["message", "custom"]),
    },
)
pi_records = st.fixed_dictionaries(
    {"type": st.sampled_from([*sorted(PI_ENTRY_TYPES - {"session"}), "other"])},
    optional={"message": json_values, "summary": json_values, "timestamp": json_values},
)


def only_format_errors(data: bytes, **kwargs: Any) -> ImportPlan | None:
    """Parse, allowing no failure other than an ``ImportFormatError``."""
    try:
        return parse_conversation_bytes(data, name="fuzz.jsonl", **kwargs)
    except ImportFormatError:
        return None


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_fail_only_with_import_format_error(data: bytes) -> None:
    only_format_errors(data)


@settings(max_examples=150, deadline=None)
@given(st.lists(chat_records | pi_records, min_size=1, max_size=8), st.booleans())
def test_arbitrary_records_parse_whole_or_fail_cleanly(
    records: list[dict[str, Any]], as_array: bool
) -> None:
    if as_array:
        data = json.dumps(records).encode()
    else:
        data = "".join(json.dumps(r) + "\n" for r in records).encode()
    plan = only_format_errors(data)
    if plan is None:
        return
    assert len(plan.entries) in (plan.record_count, plan.record_count + 1)
    again = only_format_errors(data)
    assert again is not None and again.entries == plan.entries
    assert sum(e.parent_id is None for e in plan.entries) == 1


def test_import_format_error_pickles() -> None:
    import pickle

    error = ImportFormatError("f.jsonl", "bad", line=3)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.line, copy.reason) == (str(error), 3, "bad")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 100_000, "invalid JSON"),
        ('{"role": "user", "content": ' + "[" * 100_000 + "\n", "invalid JSON"),
        ('{"role": "user", "n": ' + "9" * 5000 + "}\n", "invalid JSON"),
    ],
)
def test_pathological_json_is_a_format_error(text: str, reason: str) -> None:
    with pytest.raises(ImportFormatError, match=reason):
        parse_conversation_bytes(text.encode(), name="deep.json")


@pytest.mark.parametrize("levels", [500, 100_000])
def test_tool_call_arguments_nested_too_deep_are_kept_raw(levels: int) -> None:
    """Nested past an entry's 128 levels, or past the JSON parser: text, not a crash."""
    arguments = '{"a": ' + "[" * levels + "]" * levels + "}"
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    line = {"role": "assistant", "content": "", "tool_calls": [call]}
    plan = parse_conversation_bytes(json.dumps(line).encode(), name="deep.jsonl")
    (entry,) = plan.entries
    assert entry.message is not None and entry.message.tool_calls is not None
    assert entry.message.tool_calls[0].arguments == {"_raw": arguments}
