"""``prism-om import FILE --session S --append``: a growing transcript continues a session.

A nightly sync imports the whole file again each time: only what the session does not
hold is added, after its leaf, and a message dated before the leaf is refused by name.
A native session file with memory records is refused rather than losing them unsaid.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.store_builders import cli

from prism_om.stores import open_store

DATA = Path(__file__).resolve().parents[1] / "data" / "import"


def _chat(path: Path, messages: list[tuple[str, str, str | None]]) -> None:
    lines = []
    for role, text, when in messages:
        record: dict[str, Any] = {"role": role, "content": text}
        if when is not None:
            record["timestamp"] = when
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")


DAY_1 = [
    ("user", "The Lisbon office closes on Thursdays.", "2026-03-02T09:00:00Z"),
    ("assistant", "Noted: Lisbon closes on Thursdays.", "2026-03-02T09:00:05Z"),
]
DAY_2 = [
    ("user", "Billing moved to PostgreSQL 16.", "2026-03-03T09:00:00Z"),
    ("assistant", "Noted: billing runs PostgreSQL 16.", "2026-03-03T09:00:04Z"),
]


def _branch(url: str, sid: str) -> list[tuple[str | None, str, str | None]]:
    async def read() -> list[tuple[str | None, str, str | None]]:
        async with await open_store(url, read_only=True) as store:
            return [
                (
                    e.message.role if e.message else None,
                    e.message.text() if e.message else "",
                    e.parent_id,
                )
                for e in await store.entries(sid)
            ]

    return asyncio.run(read())


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
@pytest.mark.parametrize("dated", [True, False])
def test_append_adds_only_new_messages_and_twice_adds_nothing(
    kind: str, dated: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:{tmp_path / 's.db'}" if kind == "sqlite" else f"jsonl:{tmp_path / 's'}"
    chat = tmp_path / "agent.jsonl"
    strip = (lambda m: [(r, t, None) for r, t, _ in m]) if not dated else (lambda m: m)
    _chat(chat, strip(DAY_1))
    assert cli(capsys, "import", str(chat), "--session", "s", "--db", url)[0] == 0
    _chat(chat, strip(DAY_1 + DAY_2))  # the transcript grew overnight
    base = ("import", str(chat), "--session", "s", "--db", url, "--append", "--json")
    code, out, err = cli(capsys, *base)
    assert code == 0, err
    first = json.loads(out)
    assert first["appended"] is True and first["entries"] == 2 and first["skipped"] == 2
    code, out, err = cli(capsys, *base)
    assert code == 0, err
    again = json.loads(out)
    assert again["entries"] == 0 and again["skipped"] == 4
    branch = _branch(url, "s")
    assert [t for _, t, _ in branch] == [t for _, t, _ in DAY_1 + DAY_2]
    assert again["leafId"] == first["leafId"]


def test_append_skips_a_message_by_content_and_time_wherever_it_moved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:{tmp_path / 's.db'}"
    chat = tmp_path / "agent.jsonl"
    _chat(chat, DAY_1)
    assert cli(capsys, "import", str(chat), "--session", "s", "--db", url)[0] == 0
    # Another export of the same history: an earlier line first moves every line down.
    other = tmp_path / "export.jsonl"
    _chat(other, [("user", "Good morning.", "2026-03-02T08:59:00Z"), *DAY_1, *DAY_2])
    code, out, err = cli(
        capsys,
        "import",
        str(other),
        "--session",
        "s",
        "--db",
        url,
        "--append",
        "--json",
        "--allow-earlier",
    )
    assert code == 0, err
    assert json.loads(out)["entries"] == 3  # the earlier line and day 2; day 1 skipped


def test_a_message_dated_before_the_leaf_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:{tmp_path / 's.db'}"
    chat = tmp_path / "agent.jsonl"
    _chat(chat, DAY_2)
    assert cli(capsys, "import", str(chat), "--session", "s", "--db", url)[0] == 0
    late = tmp_path / "late.jsonl"
    _chat(late, DAY_1)  # a day earlier than the leaf
    code, _, err = cli(capsys, "import", str(late), "--session", "s", "--db", url, "--append")
    assert code == 2
    assert "late.jsonl: line 1:" in err and "Lisbon office" in err
    assert "before the leaf" in err and "--allow-earlier" in err
    assert len(_branch(url, "s")) == 2  # nothing written
    code, _, err = cli(
        capsys, "import", str(late), "--session", "s", "--db", url, "--append", "--allow-earlier"
    )
    assert code == 0, err
    assert len(_branch(url, "s")) == 4


def test_append_and_allow_earlier_need_their_partners(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = tmp_path / "agent.jsonl"
    _chat(chat, DAY_1)
    db = str(tmp_path / "s.db")
    code, _, err = cli(capsys, "import", str(chat), "--db", db, "--append")
    assert code == 2 and "--append needs --session" in err
    code, _, err = cli(capsys, "import", str(chat), "--db", db, "--allow-earlier")
    assert code == 2 and "--allow-earlier applies to --append" in err
    assert not (tmp_path / "s.db").exists()


def test_a_native_file_with_memory_records_is_refused_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    native = DATA / "native.jsonl"
    code, _, err = cli(capsys, "import", str(native), "--db", str(db))
    assert code == 2
    assert "memory record(s)" in err and "om.observations.recorded" in err
    assert "prism-om copy" in err and "--drop-memory" in err
    assert not db.exists()  # refused before a store was made
    code, _, err = cli(capsys, "import", str(native), "--db", str(db), "--drop-memory")
    assert code == 0, err
