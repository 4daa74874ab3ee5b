"""The CLI and untrusted text (issue 13 items 11 and 12): ``--secret`` / ``PRISM_SECRETS``
on every command that prints memory or messages, and control characters escaped."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from prism_om.cli.app import main
from prism_om.cli.redaction import SECRETS_ENV, cli_secrets
from prism_om.entries import message_entry
from prism_om.session import Session
from prism_om.stores import open_store

# One secret a JSON escape changes, one with a comma and spaces (why the variable is
# newline-separated), one that overlaps the first.
QUOTED = 'sk-live-"q"\\KEY-7781'
COMMA = "hunter2, the long one"
OVERLAP = "user-sk-live"
ESCAPES = "Title \x1b]0;pwned\x07 then \x1b[2J cleared \u202eevil \x9b1m"


def leaked(text: str, secrets: tuple[str, ...] = (QUOTED, COMMA)) -> list[str]:
    found = []
    for secret in secrets:
        once = [secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]]
        found += [f for f in [*once, *(json.dumps(f)[1:-1] for f in once)] if f in text]
    return found


async def _build(db: Path) -> str:
    async with await open_store(f"sqlite:{db}") as store:
        session = Session(store, "s1")
        first = await session.append_message(
            "user", f"My key is {QUOTED} and my password is {COMMA}. The launch is on Friday."
        )
        await session.append(
            message_entry(
                "s1",
                "assistant",
                f"Logging in as {OVERLAP}-x now.",
                parent_id=await session.leaf(),
                tool_calls=[
                    {"id": "c1", "name": "login", "arguments": {"key": QUOTED, "pw": COMMA}}
                ],
            )
        )
        await session.append_message("user", ESCAPES)
        return first.id


@pytest.fixture(scope="module")
def store_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store whose transcript and (unredacted) memory hold the secrets and escapes."""
    db = tmp_path_factory.mktemp("secrets") / "store.db"
    first = asyncio.run(_build(db))
    assert main(["observe", "--db", str(db), "--session", "s1", "--force", "--json"]) == 0
    return db, first


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def memory_id(db: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The observation that quotes the first message (the secrets with it)."""
    view = json.loads(run(capsys, "view", "--db", str(db), "--session", "s1", "--json", "--full"))
    for line in view["text"].splitlines():
        # The offline observer writes it tersely: "User: key sk-live-... password ...".
        found = re.search(r"\[([0-9a-f]{12})\] User: (My )?key (is )?sk-live", line)
        if found:
            return found.group(1)
    raise AssertionError(view["text"])


def test_the_environment_format_is_one_secret_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    monkeypatch.setenv(SECRETS_ENV, f"{COMMA}\r\n\n  \n {QUOTED}\n")
    args = argparse.Namespace(secret=["cli-one", "", " "])
    assert cli_secrets(args) == ["cli-one", COMMA, f" {QUOTED}"]
    monkeypatch.delenv(SECRETS_ENV)
    assert cli_secrets(argparse.Namespace()) == []


def test_without_secrets_the_store_really_holds_them(
    store_db: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, first = store_db
    page = run(capsys, "page", "--db", str(db), "--session", "s1", "--cursor", first, "--json")
    page += run(
        capsys,
        "page",
        "--db",
        str(db),
        "--session",
        "s1",
        "--cursor",
        first,
        "--json",
        "--detail",
        "full",
    )
    assert leaked(page)
    recall = run(capsys, "recall", "--db", str(db), "--session", "s1", memory_id(db, capsys))
    assert leaked(recall + page)


@pytest.mark.parametrize("how", ["flag", "env"])
@pytest.mark.parametrize("as_json", [True, False])
def test_every_printing_command_redacts(
    store_db: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    as_json: bool,
) -> None:
    db, first = store_db
    ident = memory_id(db, capsys)
    if how == "env":
        monkeypatch.setenv(SECRETS_ENV, f"{QUOTED}\n{COMMA}")
        extra: list[str] = []
    else:
        monkeypatch.delenv(SECRETS_ENV, raising=False)
        extra = ["--secret", QUOTED, "--secret", COMMA]
    base = ["--db", str(db), "--session", "s1", *extra, *(["--json"] if as_json else [])]
    outputs = {
        "page summary": run(capsys, "page", *base, "--cursor", first),
        "page full": run(capsys, "page", *base, "--cursor", first, "--detail", "full"),
        "recall": run(capsys, "recall", *base, ident),
        "view": run(capsys, "view", *base),
        "view full": run(capsys, "view", *base, "--full"),
        "status": run(capsys, "status", *base),
    }
    for name, out in outputs.items():
        assert not leaked(out), (name, leaked(out), out[:2000])
    assert "[REDACTED]" in outputs["recall"] and "[REDACTED]" in outputs["view full"]
    if as_json:  # a person's page shows a call as name(…), without its arguments
        assert "[REDACTED]" in outputs["page full"]


def test_observe_and_compact_redact_what_they_record_and_print(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "fresh.db"
    asyncio.run(_build(db))
    monkeypatch.setenv(SECRETS_ENV, COMMA)
    base = ["--db", str(db), "--session", "s1", "--secret", QUOTED]
    printed = run(capsys, "observe", *base, "--force")
    printed += run(capsys, "observe", *base, "--force", "--json")
    printed += run(capsys, "compact", *base)
    assert not leaked(printed)

    async def stored() -> str:
        async with await open_store(f"sqlite:{db}") as store:
            entries = await store.list("s1")
            return "".join(e.to_json() for e in entries if e.kind != "message")

    records = asyncio.run(stored())
    assert '"om.observations.recorded"' in records and '"compaction"' in records
    assert not leaked(records), leaked(records)


def test_help_documents_the_secret_options(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("view", "status", "recall", "page", "observe", "compact"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        assert "--secret VALUE" in out and SECRETS_ENV in out and "one per line" in out


# -- 13.12: terminal escapes ------------------------------------------------------------


def test_printable_escapes_controls_and_bidi_overrides_only() -> None:
    from prism_om.cli.output import printable

    assert printable(ESCAPES) == (
        "Title \\x1b]0;pwned\\x07 then \\x1b[2J cleared \\u202eevil \\x9b1m"
    )
    assert printable("plain\ttext\nwith ünïcode 😀") == "plain\ttext\nwith ünïcode 😀"


def assert_escaped(out: str) -> None:
    for raw in ("\x1b]", "\x1b[2J", "\x07", "\u202e", "\x9b"):
        assert raw not in out, (raw, out)
    assert "\\x1b[2J" in out


@pytest.mark.parametrize("detail", ["summary", "full"])
def test_page_escapes_control_characters_when_piped(
    store_db: tuple[Path, str], capsys: pytest.CaptureFixture[str], detail: str
) -> None:
    db, first = store_db
    out = run(
        capsys, "page", "--db", str(db), "--session", "s1", "--cursor", first, "--detail", detail
    )
    assert_escaped(out)


def test_other_readers_escape_control_characters(
    store_db: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = store_db
    out = run(capsys, "view", "--db", str(db), "--session", "s1", "--full")
    out += run(capsys, "view", "--db", str(db), "--session", "s1")
    assert_escaped(out)


def test_json_output_stays_exact_json(
    store_db: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, first = store_db
    out = run(
        capsys,
        "page",
        "--db",
        str(db),
        "--session",
        "s1",
        "--cursor",
        first,
        "--json",
        "--detail",
        "full",
    )
    assert "\x1b" not in out
    texts = [m["message"]["content"] for m in json.loads(out)["messages"]]
    assert ESCAPES in texts


def test_page_escapes_control_characters_on_a_terminal(store_db: tuple[Path, str]) -> None:
    db, first = store_db
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "prism_om.cli",
            "page",
            "--db",
            str(db),
            "--session",
            "s1",
            "--cursor",
            first,
            "--detail",
            "full",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FORCE_COLOR": "1", "TTY_COMPATIBLE": "1", "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" in done.stdout  # rich did style it as a terminal
    assert_escaped(done.stdout)


@pytest.mark.parametrize("given", [True, False])
def test_compact_redacts_the_summary_it_records(
    store_db: tuple[Path, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    given: bool,
) -> None:
    import shutil

    monkeypatch.delenv(SECRETS_ENV, raising=False)
    db = tmp_path / "copy.db"
    shutil.copy(store_db[0], db)  # its memory was recorded without secrets
    extra = ["--secret", QUOTED, "--secret", COMMA] if given else []
    run(capsys, "compact", "--db", str(db), "--session", "s1", *extra)

    async def summary() -> str:
        async with await open_store(f"sqlite:{db}") as store:
            compaction = await store.last_compaction("s1")
            assert compaction is not None
            return compaction.to_json()

    text = asyncio.run(summary())
    assert bool(leaked(text)) is not given
