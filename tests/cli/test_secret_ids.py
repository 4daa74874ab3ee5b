"""A secret inside an id is redacted on every surface (issue 28 item 7).

Session and entry ids are the user's text as much as a message is: a session named after
a ticket or a token, an entry id a host drew from a credential. Every command that takes
``--secret`` is run (enumerated from the parser, so a new one is covered or this test
fails), in text and in ``--json``, over a store whose session id, entry ids and cursor all
hold the secret; then the MCP server's every tool (enumerated from the server), the inspect
page, and the Agents SDK recall tool. None may print the secret.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import ok, run_cli
from support.inspect_server import serving

from prism_om.cli.app import build_parser, main
from prism_om.entries import message_entry
from prism_om.stores import open_store

# As long as the marker: a page redacted of it keeps its length, which the inspect page's
# Content-Length still needs here (that header is fixed apart from this test).
SECRET = "q7zsecret9"
assert len(SECRET) == len("[REDACTED]")
SESSION = f"chat-{SECRET}"
MISSING = f"nowhere-{SECRET}"  # a cursor that is not on the branch: echoed by errors
TEXTS = [
    ("user", "We moved the billing service to PostgreSQL 16 last Friday."),
    ("assistant", "Noted: billing runs on PostgreSQL 16 since Friday."),
    ("user", "Remember that the Lisbon office closes on Thursdays."),
    ("assistant", "Noted: the Lisbon office closes on Thursdays."),
    ("user", "The release train leaves every second Tuesday at noon."),
    ("assistant", "Noted: a release every second Tuesday at noon."),
]


def entry_id(index: int) -> str:
    return f"m{index}-{SECRET}"


async def _build(db: Path) -> None:
    async with await open_store(f"sqlite:{db}") as store:
        parent = None
        for index, (role, text) in enumerate(TEXTS):
            entry = message_entry(SESSION, role, text, parent_id=parent, entry_id=entry_id(index))
            await store.append(entry)
            parent = entry.id


@pytest.fixture(scope="module")
def store_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The store, its memory recorded (citing the secret ids), and one memory id."""
    db = tmp_path_factory.mktemp("secret-ids") / "store.db"
    asyncio.run(_build(db))
    assert main(["observe", "--db", str(db), "--session", SESSION, "--force", "--json"]) == 0
    view = json.loads(
        ok(
            run_cli(
                "view", "--db", str(db), "--session", SESSION, "--json", "--full", cwd=db.parent
            )
        )
    )
    return db, view["observationIds"][0]


def _commands_taking_secrets() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        name
        for name, command in sub.choices.items()
        if any("--secret" in action.option_strings for action in command._actions)
    }


def _cases(memory_id: str) -> dict[str, list[list[str]]]:
    """The arguments each command runs with, past ``--db`` and ``--secret``."""
    session = ["--session", SESSION]
    page = [*session, "--cursor", entry_id(1), "--limit", "2"]
    return {
        "status": [session, [*session, "--json"]],
        "view": [[*session, "--full"], [*session, "--full", "--json"]],
        "recall": [[memory_id, *session], [memory_id, *session, "--json"]],
        "page": [
            page,
            [*page, "--json"],
            [*page, "--json", "--detail", "full"],
            [*page, "--backward", "--json"],
        ],
        "search": [["billing lisbon", *session], ["billing lisbon", *session, "--json"]],
        "sessions": [[], ["--json"]],
        "observe": [[*session, "--force"], [*session, "--force", "--json"]],
        "compact": [[*session, "--force"], [*session, "--force", "--json"]],
        "check": [[], ["--json"]],
        # Servers: run below, as a client meets them.
        "mcp": [],
        "inspect": [],
    }


def test_every_command_that_takes_secrets_is_covered(store_db: tuple[Path, str]) -> None:
    assert set(_cases(store_db[1])) == _commands_taking_secrets()


@pytest.mark.parametrize("command", sorted(_commands_taking_secrets() - {"mcp", "inspect"}))
def test_no_command_prints_a_secret_inside_an_id(
    command: str,
    store_db: tuple[Path, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, memory_id = store_db
    for args in _cases(memory_id)[command]:
        printed = []
        for secrets in ([], ["--secret", SECRET]):
            db = tmp_path / "store.db"
            shutil.copyfile(source, db)  # observe and compact write: each run starts alike
            code = main([command, "--db", str(db), *secrets, *args])
            out, err = capsys.readouterr()
            assert code == 0, err
            printed.append(out + err)
        shown, redacted = printed
        assert SECRET not in redacted, (args, redacted)
        if SECRET in shown:  # an id was printed: redacted, not left out
            assert "[REDACTED]" in redacted, args


def test_a_refused_cursor_is_not_echoed(
    store_db: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = store_db
    for extra in ([], ["--json"]):
        args = ["page", "--db", str(db), "--session", SESSION, "--cursor", MISSING, *extra]
        assert main([*args, "--secret", SECRET]) == 2
        out, err = capsys.readouterr()
        assert SECRET not in out + err and "[REDACTED]" in err


def _tool_calls(memory_id: str) -> dict[str, list[dict[str, Any]]]:
    return {
        "list_sessions": [{}],
        "memory_status": [{"session_id": SESSION}],
        "memory_view": [{"session_id": SESSION, "mode": "full"}],
        "recall": [
            {"session_id": SESSION, "id": memory_id},
            {"session_id": SESSION, "cursor": entry_id(1), "limit": 2},
            {"session_id": SESSION, "cursor": entry_id(1), "detail": "full"},
            {"session_id": SESSION, "cursor": MISSING},
        ],
        "search_memory": [{"session_id": SESSION, "query": "billing"}],
        "append_message": [{"session_id": SESSION, "role": "user", "text": "one more"}],
        "observe": [{"session_id": SESSION, "force": True}],
    }


async def test_no_mcp_tool_answers_a_secret_inside_an_id(
    store_db: tuple[Path, str], tmp_path: Path
) -> None:
    from mcp import Client
    from support.mcp_client import server_params

    source, memory_id = store_db
    db = tmp_path / "store.db"
    shutil.copyfile(source, db)
    calls = _tool_calls(memory_id)
    params = server_params(db, "--allow-write", secrets=SECRET)
    async with Client(params) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == set(calls)
        for name, arguments in calls.items():
            for args in arguments:
                result = await client.call_tool(name, args)
                text = "".join(getattr(part, "text", "") for part in result.content)
                assert SECRET not in text, (name, args, text)


def test_the_inspect_page_shows_no_secret_inside_an_id(
    store_db: tuple[Path, str], tmp_path: Path
) -> None:
    import httpx

    db, _ = store_db
    with (
        serving(str(db), cwd=tmp_path, secrets=SECRET) as (url, said),
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        paths = ("/", f"/s/{SESSION}", f"/s/{SESSION}/search?q=billing+lisbon")
        pages = [client.get(path) for path in paths]
    assert [page.status_code for page in pages] == [200, 200, 200]
    assert SECRET not in said + "".join(page.text for page in pages)
    assert "[REDACTED]" in pages[0].text


@pytest.fixture
def agents_session() -> Iterator[Any]:
    from prism_om.attach import create_observational_memory
    from prism_om.integrations.openai_agents import PrismSession
    from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider

    worker = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    memory = create_observational_memory(observation=worker, secrets=[SECRET])
    yield PrismSession(SESSION, "memory:", memory=memory)


async def test_the_agents_sdk_recall_tool_redacts_ids_and_its_errors(agents_session: Any) -> None:
    from prism_om.integrations.openai_agents import recall_tool

    async with agents_session as session:
        await session.add_items([{"role": "user", "content": "hello"}])
        tool = recall_tool(session)

        async def ask(arguments: dict[str, Any]) -> str:
            answer: str = await tool.on_invoke_tool(None, json.dumps(arguments))  # type: ignore[arg-type]
            return answer

        refused = await ask({"cursor": MISSING})
        assert json.loads(refused)["error"] == "EntryNotFoundError"
        assert SECRET not in refused and "[REDACTED]" in refused
        (message,) = [e for e in await session._store.entries(SESSION) if e.kind == "message"]
        page = await ask({"cursor": message.id, "direction": "backward"})
        assert SECRET not in page
