"""Issue 28 item 4: one malformed tombstone record no longer breaks every read.

A store written by hand (or by a version without the append rule) may hold a tombstone
record with ``"ids": null``, an int, a ``"reason"`` list, or a message in a tombstone
session. Each read skips such an entry with a ``MalformedTombstoneWarning`` naming its
entry id, every surface keeps working, and the well-formed tombstones still withhold.
The writers refuse them: the propagator's bad arguments are typed errors (the store's
append rule is ``prism_om.testing.tombstone_conformance``), an import into a tombstone
session is refused at the file's line, and ``delete`` erases a tombstone session only with
``--allow-tombstones``, saying what becomes visible again.
"""

from __future__ import annotations

import asyncio
import io
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from support.revocation_surfaces import PASSPORT, every_surface, record_story, revoke

import prism_om.stores.base
from prism_om.cli import main as cli_main
from prism_om.cli import output as cli_output
from prism_om.entries import SessionEntry, custom_entry
from prism_om.errors import (
    ImportFormatError,
    InvalidInputError,
    MalformedTombstoneWarning,
    PrismMemoryError,
)
from prism_om.importers import import_conversation
from prism_om.observational_memory.revocation import (
    TOMBSTONES_RECORDED,
    create_deletion_propagator,
    list_invalidated_ids,
    list_store_invalidated_ids,
)
from prism_om.stores import SessionStore, open_store
from prism_om.testing.conformance import StoreOpener
from prism_om.testing.generate import make_message
from prism_om.testing.tombstone_conformance import tombstone_data

pytestmark = pytest.mark.filterwarnings("error")

TS = "2026-11-30T09:00:00.000Z"
# The reviewer's three records, and a message where only tombstone records belong.
BAD: dict[str, dict[str, Any] | None] = {
    "bad-null-ids": {**tombstone_data(), "ids": None},
    "bad-int-ids": tombstone_data(ids=7),
    "bad-list-reason": tombstone_data(reason=["revoked"]),
    "bad-message": None,
}


async def write_by_hand(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch, session_id: str = "tombstones.privacy"
) -> list[str]:
    """Append the BAD entries as a store written without the rule holds them."""
    with monkeypatch.context() as patched:
        # raising=False keeps this working where the rule is absent: a store of an older
        # version is exactly what the read must survive.
        patched.setattr(prism_om.stores.base, "check_tombstone_entry", lambda e: None, False)
        parent = await store.leaf(session_id)
        for entry_id, data in BAD.items():
            entry: SessionEntry
            if data is None:
                entry = make_message(session_id, entry_id, parent, "user", "a stray note", 1)
            else:
                entry = custom_entry(
                    session_id, data, parent_id=parent, entry_id=entry_id, timestamp=TS
                )
            await store.append(entry)
            parent = entry_id
    return list(BAD)


def skipped_ids(caught: list[warnings.WarningMessage]) -> set[str]:
    found = set()
    for w in caught:
        assert issubclass(w.category, MalformedTombstoneWarning), w
        assert isinstance(w.message, MalformedTombstoneWarning)
        assert isinstance(w.message, PrismMemoryError) and w.message.entry_id is not None
        assert f"{w.message.entry_id!r}" in str(w.message)
        found.add(w.message.entry_id)
    return found


async def test_a_malformed_record_is_skipped_with_a_warning_on_every_surface(
    store_opener: StoreOpener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(cli_output, "_STDOUT", None)
    monkeypatch.setattr(cli_output, "_STDERR", None)
    store = await store_opener.open()
    try:
        ids = await record_story(store)
        blocked = await revoke(store, ids)
        bad = await write_by_hand(store, monkeypatch)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", MalformedTombstoneWarning)
            # The well-formed tombstone still withholds; the others withhold nothing.
            assert await list_invalidated_ids(store, "privacy") == {ids["m1"]}
            assert await list_store_invalidated_ids(store) == blocked
            assert skipped_ids(caught) == set(bad)
            caught.clear()
            after = await every_surface(store, ids, blocked)
        assert skipped_ids(caught) == set(bad)  # the MCP tools and the inspector read them
        leaked = [surface for surface, text in after.items() if PASSPORT in text]
        assert not leaked, {s: after[s] for s in leaked}
        for surface in (s for s in after if s.startswith("cli ")):
            # Each command says it, as its own warning line naming the entry.
            for entry_id in bad:
                assert f"prism-om: warning: skipped entry {entry_id!r}" in after[surface]
            assert "MalformedTombstoneWarning:" not in after[surface]
    finally:
        await store.close()


async def test_a_tombstone_session_without_a_valid_scope_is_skipped(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await record_story(store)
    blocked = await revoke(store, ids)
    with monkeypatch.context() as patched:
        patched.setattr(prism_om.stores.base, "check_tombstone_entry", lambda e: None, False)
        data = tombstone_data(scope="-x", ids=["d00000000004"])
        await store.append(custom_entry("tombstones.-x", data, entry_id="t-x", timestamp=TS))
    with pytest.warns(MalformedTombstoneWarning, match="'tombstones.-x'") as caught:
        assert await list_store_invalidated_ids(store) == blocked
    assert [w.message.session_id for w in caught] == ["tombstones.-x"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("ids", "reason"),
    [(None, "revoked"), (7, "revoked"), ([5], "revoked"), (["m1"], ["revoked"]), (["m1"], None)],
)
async def test_the_propagator_refuses_bad_arguments_with_a_typed_error(
    store: SessionStore, ids: Any, reason: Any
) -> None:
    propagate = create_deletion_propagator(store).propagate
    with pytest.raises(InvalidInputError):
        await propagate("privacy", ids, reason=reason)
    assert await store.sessions() == []


def _native_file(path: Path, data: dict[str, Any] | None) -> Path:
    """A native session file of tombstone session ``tombstones.privacy``: one good record,
    then ``data`` as a second (a message when None)."""
    first = custom_entry("tombstones.privacy", tombstone_data(), entry_id="t1", timestamp=TS)
    if data is None:
        second = make_message("tombstones.privacy", "t2", "t1", "user", "stray", 1)
    else:
        second = custom_entry(
            "tombstones.privacy", data, parent_id="t1", entry_id="t2", timestamp=TS
        )
    path.write_text("".join(json.dumps(e.to_wire()) + "\n" for e in (first, second)))
    return path


@pytest.mark.parametrize("name", sorted(BAD))
async def test_an_import_into_a_tombstone_session_refuses_a_malformed_record(
    store: SessionStore, tmp_path: Path, name: str
) -> None:
    path = _native_file(tmp_path / "tombstones.jsonl", BAD[name])
    with pytest.raises(ImportFormatError) as info:
        await import_conversation(store, path, format="native", session_id="tombstones.privacy")
    assert info.value.line == 2 and "tombstones.privacy" in str(info.value)
    assert await store.sessions() == []
    # A well-formed file imports, and withholds.
    good = _native_file(tmp_path / "good.jsonl", tombstone_data(ids=["m-other"]))
    await import_conversation(store, good, format="native", session_id="tombstones.privacy")
    assert await list_invalidated_ids(store, "privacy") == {"m-gone", "m-other"}


async def test_a_transcript_cannot_be_imported_into_a_tombstone_session(
    store: SessionStore, tmp_path: Path
) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "hello"}]))
    with pytest.raises(ImportFormatError, match="holds only"):
        await import_conversation(store, chat, session_id="tombstones.privacy")
    record = custom_entry("s1", tombstone_data(), entry_id="t1", timestamp=TS)
    native = tmp_path / "misplaced.jsonl"
    native.write_text(json.dumps(record.to_wire()) + "\n")
    with pytest.raises(ImportFormatError, match="belongs in a tombstones"):
        await import_conversation(store, native, format="native", session_id="s2")
    assert await store.sessions() == []


# -- the CLI: import and delete, on every adapter it opens by URL -----------------------


@pytest.fixture(params=["sqlite", "jsonl", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    if request.param == "jsonl":
        return f"jsonl:{tmp_path / 'store'}"
    return f"sqlite:{tmp_path / 'store.db'}"


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The command in this process, on a thread of its own (it runs its own event loop)."""
    capsys.readouterr()
    code = await asyncio.to_thread(cli_main, list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


async def _revoked_story(url: str) -> dict[str, str]:
    async with await open_store(url) as store:
        ids = await record_story(store)
        await revoke(store, ids)
        return ids


async def test_the_cli_import_refuses_a_malformed_tombstone_record(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _native_file(tmp_path / "tombstones.jsonl", BAD["bad-null-ids"])
    argv = ["import", str(path), "--db", store_url, "--format", "native"]
    code, _, err = await cli(capsys, *argv, "--session", "tombstones.privacy")
    assert code == 2, err
    assert "line 2" in err and "data.ids" in err and "TypeError" not in err
    async with await open_store(store_url) as store:
        assert "tombstones.privacy" not in await store.sessions()


async def test_delete_erases_a_tombstone_session_only_with_the_flag(
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(cli_output, "_STDOUT", None)
    monkeypatch.setattr(cli_output, "_STDERR", None)
    ids = await _revoked_story(store_url)
    base = ["--db", store_url]
    code, _, err = await cli(capsys, "delete", "tombstones.privacy", *base, "--yes")
    assert code == 2 and "--allow-tombstones" in err and "visible again" in err

    # On a terminal the question says what comes back; "n" keeps it.
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, _, err = await cli(capsys, "delete", "tombstones.privacy", *base, "--allow-tombstones")
    assert code == 0 and "nothing deleted" in err
    assert "revoke 1 id(s), which become visible again to every read of scope 'privacy'" in err
    code, out, _ = await cli(capsys, "recall", "d00000000001", *base, "--session", "s1")
    assert PASSPORT not in out and "[revoked]" in out

    code, out, err = await cli(
        capsys, "delete", "tombstones.privacy", *base, "--allow-tombstones", "--yes", "--json"
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["session"] == "tombstones.privacy" and report["revokedIdsVisibleAgain"] == 1
    # What the flag said it would let back is back.
    code, out, _ = await cli(capsys, "recall", "d00000000001", *base, "--session", "s1")
    assert code == 0 and PASSPORT in out
    async with await open_store(store_url) as store:
        assert "tombstones.privacy" not in await store.sessions()
        assert ids["m1"] not in await list_store_invalidated_ids(store)


def test_the_delete_help_says_what_the_flag_lets_back(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main(["delete", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--allow-tombstones" in text and "becomes visible again in every read" in text


def test_the_record_type_is_the_one_the_propagator_writes() -> None:
    assert tombstone_data()["type"] == TOMBSTONES_RECORDED
