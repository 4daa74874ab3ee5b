"""No command removes or changes a session it was not asked to (issue 28 item 0).

Every command of the parser (enumerated, so a new one fails here until it has a case) runs
against a store holding a ``precious`` session (branches, a moved leaf, memory records),
on SQLite, JSONL and PostgreSQL; after each, the session's entries must be byte for byte
what they were. Commands that write are pointed at a ``work`` session, or at the store as a
whole (``demo``, ``import``, ``copy --to``, ``eval``); the servers are run as a client meets
them. ``demo`` must refuse the store until ``--force``, and then replace only its own
sessions, run after run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cli import failed, ok, run_cli
from support.inspect_server import serving

from prism_om.cli.app import build_parser, main
from prism_om.entries import message_entry
from prism_om.stores import open_store

DATA = Path(__file__).parents[1] / "data"
DEMO_SESSIONS = {"atlas-kickoff", "atlas-go-no-go"}


def chain(sid: str, texts: list[str], parent: str | None = None) -> list[Any]:
    out = []
    for index, text in enumerate(texts):
        role = "user" if index % 2 == 0 else "assistant"
        entry = message_entry(sid, role, text, parent_id=parent, entry_id=f"{sid}-{text[:6]}")
        out.append(entry)
        parent = entry.id
    return out


async def _fill(url: str) -> None:
    async with await open_store(url) as store:
        main_line = chain(
            "precious",
            [
                "alpha: our launch is on Friday",
                "beta: noted, Friday",
                "gamma: the venue is Porto",
                "delta: Porto it is",
            ],
        )
        side = chain("precious", ["branch: or Lisbon?"], parent=main_line[1].id)
        await store.append_many([*main_line, *side])
        await store.checkout("precious", main_line[-1].id)  # the side branch stays a leaf
        await store.append_many(
            chain("work", ["one: a", "two: b", "three: c", "four: d", "five: e", "six: f"])
        )


def build(url: str) -> None:
    asyncio.run(_fill(url))
    assert main(["observe", "--db", url, "--session", "precious", "--force"]) == 0


async def _snapshot(url: str, sid: str) -> dict[str, Any]:
    async with await open_store(url, read_only=True, create=False) as store:
        entries = await store.list(sid)
        return {
            "entries": [
                json.dumps(e.model_dump(by_alias=True, mode="json"), sort_keys=True)
                for e in entries
            ],
            "leaf": await store.leaf(sid),
            "leaves": await store.leaves(sid),
            "sessions": await store.sessions(),
        }


def snapshot(url: str, sid: str = "precious") -> dict[str, Any]:
    """The session's entries as stored, its leaves, and the store's session ids."""
    return asyncio.run(_snapshot(url, sid))


async def _memory_id_and_cursor(url: str) -> tuple[str, str]:
    async with await open_store(url, read_only=True, create=False) as store:
        ledger = await store.ledger("precious")
        entries = await store.entries("precious")
    return ledger.observations[0].id, entries[0].id


def _commands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


Case = tuple[list[str], int]


def _cases(db: str, tmp: Path, kind: str, source: str) -> dict[str, list[Case]]:
    """Each command's runs (arguments, exit code); ``None`` entries are run as servers."""
    memory_id, cursor = asyncio.run(_memory_id_and_cursor(db))
    at = ["--db", db]
    server = kind == "postgres"
    return {
        "demo": [(["demo", *at], 2), (["demo", *at, "--force"], 0), (["demo", *at, "--force"], 0)],
        "import": [
            (
                [
                    "import",
                    str(DATA / "import" / "openai_array.json"),
                    *at,
                    "--session",
                    "imported",
                ],
                0,
            )
        ],
        "observe": [(["observe", *at, "--session", "work", "--force"], 0)],
        "compact": [(["compact", *at, "--session", "work", "--force"], 0)],
        "status": [(["status", *at, "--session", "precious", "--json"], 0)],
        "view": [(["view", *at, "--session", "precious", "--full"], 0)],
        "recall": [(["recall", memory_id, *at, "--session", "precious"], 0)],
        "page": [(["page", *at, "--session", "precious", "--cursor", cursor], 0)],
        "search": [(["search", "Rust", *at, "--session", "precious", "--json"], 0)],
        "sessions": [(["sessions", *at], 0)],
        "check": [
            # On a server check reads (rows, fold tables); --repair says what to run.
            (["check", *at], 0),
            (
                [
                    "check",
                    *at,
                    "--repair",
                    "--backup",
                    str(tmp / "backup"),
                    "--output",
                    str(tmp / "repaired.db"),
                ],
                2 if server else 0,
            ),
        ],
        "schema": [(["schema", "--dialect", "postgres"], 0)],
        # A current store: nothing to migrate, nothing written (older ones: test_migrate).
        "migrate": [(["migrate", *at, "--json"], 0)],
        "copy": [
            (["copy", "--from", source, "--to", db], 0),
            (["copy", "--from", db, "--to", f"sqlite:{tmp / 'copied.db'}"], 0),
        ],
        "eval": [(["eval", str(DATA / "eval" / "locomo_synthetic.json"), *at, "--json"], 0)],
        "mcp": [],  # served: see _serve
        "inspect": [],
        # Last: it erases the work session the others wrote to.
        "delete": [(["delete", "precious", *at], 2), (["delete", "work", *at, "--yes"], 0)],
    }


async def _mcp(db: str, cursor: str) -> None:
    from mcp import Client
    from support.mcp_client import server_params

    async with Client(server_params(db, "--allow-write")) as client:
        calls = [
            ("list_sessions", {}),
            ("recall", {"session_id": "precious", "cursor": cursor}),
            ("append_message", {"session_id": "work", "role": "user", "text": "more"}),
            ("observe", {"session_id": "work", "force": True}),
        ]
        for name, args in calls:
            result = await client.call_tool(name, args)
            assert not result.is_error, (name, result.content)


def _inspect(db: str, tmp: Path) -> None:
    with serving(db, cwd=tmp) as (url, _), httpx.Client(base_url=url, timeout=60) as client:
        for path in ("/", "/s/precious"):
            assert client.get(path).status_code == 200, path


def _run_every_command(
    db: str, tmp: Path, kind: str, source: str, capsys: pytest.CaptureFixture[str]
) -> None:
    build(db)
    capsys.readouterr()
    before = snapshot(db)
    cases = _cases(db, tmp, kind, source)
    assert set(cases) == _commands(), "give every command a case here"
    _, cursor = asyncio.run(_memory_id_and_cursor(db))
    for name, runs in cases.items():
        if name == "mcp":
            with capsys.disabled():  # the client hands the server a real stderr
                asyncio.run(_mcp(db, cursor))
        elif name == "inspect":
            _inspect(db, tmp)
        for args, code in runs:
            got = main(args)
            out, err = capsys.readouterr()
            assert got == code, (args, out, err)
        after = snapshot(db)
        assert after["entries"] == before["entries"], name
        assert (after["leaf"], after["leaves"]) == (before["leaf"], before["leaves"]), name
    sessions = set(snapshot(db)["sessions"])
    assert {"precious", "imported", "incoming"} | DEMO_SESSIONS <= sessions
    assert "work" not in sessions


def _source(tmp: Path) -> str:
    url = f"sqlite:{tmp / 'source.db'}"

    async def fill() -> None:
        async with await open_store(url) as store:
            await store.append_many(chain("incoming", ["in: hello", "out: hi"]))

    asyncio.run(fill())
    return url


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_every_command_leaves_a_session_it_was_not_asked_about(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:{tmp_path / 'store.db'}" if kind == "sqlite" else f"jsonl:{tmp_path / 'store'}"
    _run_every_command(db, tmp_path, kind, _source(tmp_path), capsys)


def test_every_command_leaves_a_session_it_was_not_asked_about_on_a_server(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_every_command(postgres_url, tmp_path, "postgres", _source(tmp_path), capsys)


# -- demo ---------------------------------------------------------------------------------


def test_demo_refuses_the_default_store_when_it_holds_a_users_session(tmp_path: Path) -> None:
    imported = ["import", str(DATA / "import" / "openai_array.json"), "--session", "mine"]
    ok(run_cli(*imported, cwd=tmp_path))  # no --db: the demo's default file
    url = f"sqlite:{tmp_path / 'prism-om-demo.db'}"
    before = snapshot(url, "mine")
    line = failed(run_cli("demo", cwd=tmp_path), 2)
    assert "'mine'" in line and "--force" in line and "--db NEW" in line
    assert snapshot(url, "mine") == before
    ok(run_cli("demo", "--force", cwd=tmp_path))
    after = snapshot(url, "mine")
    assert after["entries"] == before["entries"] and after["leaf"] == before["leaf"]
    assert set(after["sessions"]) == {"mine"} | DEMO_SESSIONS


def test_demo_never_replaces_a_session_named_like_its_own_that_it_did_not_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:{tmp_path / 'demo.db'}"
    assert main(["demo", "--db", url]) == 0
    capsys.readouterr()

    async def add_to_the_demos_session() -> None:
        from prism_om.session import Session

        async with await open_store(url) as store:
            await Session(store, "atlas-kickoff").append_message("user", "my own note")

    asyncio.run(add_to_the_demos_session())
    before = snapshot(url, "atlas-kickoff")
    for force in ([], ["--force"]):
        assert main(["demo", "--db", url, *force]) == 2
        _, err = capsys.readouterr()
        assert "'atlas-kickoff'" in err and "--db NEW" in err
        assert snapshot(url, "atlas-kickoff") == before


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgres"])
def test_demo_replaces_its_own_sessions_run_after_run(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    url = {
        "memory": "memory:",
        "jsonl": f"jsonl:{tmp_path / 'store'}",
        "sqlite": f"sqlite:{tmp_path / 'store.db'}",
    }.get(kind) or request.getfixturevalue("postgres_url")
    counts = []
    for _ in range(2):
        assert main(["demo", "--db", url]) == 0
        out, _ = capsys.readouterr()
        if kind == "memory":
            assert "keeps nothing past this command" in out
            continue
        done = snapshot(url, "atlas-kickoff")
        assert set(done["sessions"]) == DEMO_SESSIONS
        counts.append(len(done["entries"]))
    assert kind == "memory" or counts[0] == counts[1]  # replaced, not appended to


@pytest.mark.parametrize(
    ("statement", "code"),
    [
        # The store refuses another program's file before writing to it (WAL mode too).
        ("CREATE TABLE notes (text TEXT)", 1),
        ("PRAGMA user_version = 7", 1),
        # A file with no tables left is no store either: the demo will not make it one.
        ("CREATE TABLE gone (x); DROP TABLE gone", 2),
    ],
)
def test_demo_does_not_write_into_another_programs_sqlite_file(
    statement: str, code: int, tmp_path: Path
) -> None:
    import sqlite3

    other = tmp_path / "app.db"
    conn = sqlite3.connect(other)
    conn.executescript(statement)
    conn.commit()
    conn.close()
    before = other.read_bytes()
    line = failed(run_cli("demo", "--db", str(other), cwd=tmp_path), code)
    assert "not a prism_om store" in line or "--db NEW" in line
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]
