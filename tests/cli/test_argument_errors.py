"""CLI arguments that used to crash or mislead (issue 13, item 19): clear usage errors, exit 2."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from prism_om.cli.app import main
from prism_om.entries import custom_entry, message_entry
from prism_om.importers.api import check_transcript_file
from prism_om.importers.errors import ImportFormatError
from prism_om.stores import open_store

HUGE = "9" * 20
LONG = "x" * 100_000


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "store.db"

    async def build() -> None:
        async with await open_store(f"sqlite:{path}") as store:
            first = message_entry("s1", "user", "hello", entry_id="m1")
            await store.append_many(
                [first, message_entry("s1", "assistant", "hi", parent_id="m1", entry_id="m2")]
            )

    asyncio.run(build())
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Exit code and the one stderr line of an in-process ``prism-om`` run."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors exit from inside parse_args
        code = int(exc.code or 0)
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) <= 1, err
    return code, err


@pytest.mark.parametrize("command", ["view", "status", "compact"])
@pytest.mark.parametrize("value", [HUGE, "-1", "many"])
def test_recent_messages_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], db: str, command: str, value: str
) -> None:
    code, err = run(capsys, command, "--db", db, "--session", "s1", "--recent-messages", value)
    assert code == 2
    assert "argument --recent-messages" in err and repr(value) in err
    assert "OverflowError" not in err and "unexpected" not in err


def test_recent_messages_in_range_still_works(capsys: pytest.CaptureFixture[str], db: str) -> None:
    code, err = run(capsys, "status", "--db", db, "--session", "s1", "--recent-messages", "0")
    assert code == 0, err


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["recall", "--session", "s1", LONG], "argument ID"),
        (["page", "--session", "s1", "--cursor", LONG], "argument --cursor"),
        (["view", "--session", LONG], "argument --session"),
    ],
    ids=["recall-id", "page-cursor", "session"],
)
def test_long_ids_are_named_and_shortened(
    capsys: pytest.CaptureFixture[str], db: str, argv: list[str], argument: str
) -> None:
    code, err = run(capsys, *argv[:1], "--db", db, *argv[1:])
    assert code == 2
    assert argument in err
    assert "100,000 characters" in err and "'str'" not in err
    assert len(err) < 400  # the value is shortened, not printed whole


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("/etc", "is a directory"),
        ("/dev/zero", "is a character device"),
        ("/dev/null", "is a character device"),
    ],
)
def test_import_names_what_a_non_regular_file_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, path: str, what: str
) -> None:
    target = tmp_path / "new.db"
    code, err = run(capsys, "import", path, "--db", str(target))
    assert code == 2
    assert f"{path}: {what}, not a transcript file" in err
    assert "no such file" not in err
    assert not target.exists()  # nothing created


def test_import_of_a_fifo_and_a_missing_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, err = run(capsys, "import", str(fifo), "--db", str(tmp_path / "new.db"))
    assert code == 2 and "is a named pipe (FIFO)" in err
    code, err = run(capsys, "import", str(tmp_path / "absent.jsonl"), "--db", "x.db")
    assert code == 2 and "absent.jsonl: no such file" in err


def test_the_import_api_refuses_non_regular_files(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="is a directory"):
        check_transcript_file(tmp_path)
    regular = tmp_path / "t.jsonl"
    regular.write_text("{}\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(regular)
    assert check_transcript_file(link) == link


def test_recall_pages_sources_on_the_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "wide.db"

    async def build() -> None:
        async with await open_store(f"sqlite:{path}") as store:
            chain = [
                message_entry(
                    "s1",
                    "user",
                    f"note {i}",
                    parent_id=f"m{i - 1}" if i else None,
                    entry_id=f"m{i}",
                )
                for i in range(150)
            ]
            record = custom_entry(
                "s1",
                {
                    "type": "om.observations.recorded",
                    "observations": [
                        {
                            "id": "aaaaaaaaaaaa",
                            "text": "wide",
                            "sourceEntryIds": [e.id for e in chain],
                            "observedAt": chain[-1].timestamp,
                        }
                    ],
                },
                parent_id="m149",
            )
            await store.append_many([*chain, record])

    asyncio.run(build())
    argv = ["recall", "--db", str(path), "--session", "s1", "aaaaaaaaaaaa"]
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "exact source entries 1-100 of 150; --sources-offset 100 for the next ones" in out
    assert main([*argv, "--json", "--sources-offset", "100"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [s["id"] for s in result["sources"]] == [f"m{i}" for i in range(100, 150)]
    assert result["sourcesTotal"] == 150 and result["nextSourcesOffset"] is None
