"""``prism-om copy``: sessions with every branch and their leaf, idempotent, verified."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.store_builders import chain, cli

import prism_om.cli.copy as copy_module
from prism_om.entries import message_entry
from prism_om.errors import CopyConflictError
from prism_om.stores import open_store


def _branched_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The demo store (observations, reflections) plus a side branch, leaf moved back."""
    db = tmp_path / "demo.db"
    assert cli(capsys, "demo", "--db", str(db))[0] == 0
    url = f"sqlite:{db}"

    async def branch() -> None:
        async with await open_store(url) as store:
            sid = (await store.sessions())[0]
            entries = await store.list(sid)
            fork = entries[len(entries) // 2]
            side = message_entry(sid, "user", "a side branch", parent_id=fork.id, entry_id="side-1")
            await store.append(side)
            await store.checkout(sid, entries[-1].id)

    asyncio.run(branch())
    return url


async def _snapshot(url: str) -> dict[str, Any]:
    async with await open_store(url, read_only=True, create=False) as store:
        out: dict[str, Any] = {}
        for sid in await store.sessions():
            ledger = await store.ledger(sid)
            out[sid] = (
                await store.list(sid),
                await store.leaves(sid),
                await store.leaf(sid),
                len(ledger.observations),
                len(ledger.reflections),
            )
        return out


def test_sqlite_to_postgres_and_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], postgres_url: str
) -> None:
    source = _branched_demo(tmp_path, capsys)
    code, out, err = cli(capsys, "copy", "--from", source, "--to", postgres_url, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["verified"] is True
    assert {s["status"] for s in report["sessions"]} == {"copied"}
    before = asyncio.run(_snapshot(source))
    after = asyncio.run(_snapshot(postgres_url))
    assert after == before
    sid = next(iter(before))
    assert len(before[sid][1]) == 2  # both branches went over
    assert before[sid][3] > 0 and before[sid][4] > 0  # with observations and reflections
    # Fold rows follow from appending: the server's ledger is the source's.
    code, out, _ = cli(capsys, "copy", "--from", source, "--to", postgres_url, "--json")
    again = json.loads(out)
    assert code == 0 and again["appended"] == 0
    assert {s["status"] for s in again["sessions"]} == {"skipped"}
    assert asyncio.run(_snapshot(postgres_url)) == before


def test_jsonl_to_sqlite_completes_a_partial_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = f"jsonl:{tmp_path / 'j'}"
    target = f"sqlite:{tmp_path / 't.db'}"

    a = chain("a", 1200)

    async def fill() -> None:
        async with await open_store(source) as src:
            await src.append_many(a)
            await src.append_many(chain("b", 5))
        async with await open_store(target) as tgt:  # an interrupted copy of "a"
            await tgt.append_many(a[:700])

    asyncio.run(fill())
    code, out, err = cli(capsys, "copy", "--from", source, "--to", target, "--json")
    assert code == 0, err
    by_id = {s["sessionId"]: s for s in json.loads(out)["sessions"]}
    assert by_id["a"]["status"] == "completed" and by_id["a"]["appended"] == 500
    assert by_id["b"]["status"] == "copied" and by_id["b"]["appended"] == 5
    assert asyncio.run(_snapshot(target)) == asyncio.run(_snapshot(source))


def test_only_the_named_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = f"sqlite:{tmp_path / 's.db'}"
    target = f"jsonl:{tmp_path / 'j'}"

    async def fill() -> None:
        async with await open_store(source) as src:
            for sid in ("a", "b", "c"):
                await src.append_many(chain(sid, 3))

    asyncio.run(fill())
    code, _, err = cli(
        capsys, "copy", "--from", source, "--to", target, "--session", "c", "--session", "a"
    )
    assert code == 0, err
    assert set(asyncio.run(_snapshot(target))) == {"a", "c"}
    code, _, err = cli(capsys, "copy", "--from", source, "--to", target, "--session", "zz")
    assert code == 2 and "'zz'" in err


def test_a_differing_target_session_is_refused_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = f"sqlite:{tmp_path / 's.db'}"
    target = f"sqlite:{tmp_path / 't.db'}"

    async def fill() -> None:
        async with await open_store(source) as src:
            await src.append_many(chain("a", 4))
            await src.append_many(chain("b", 4))
        async with await open_store(target) as tgt:
            other = message_entry("b", "user", "not the source's", entry_id="b-other")
            await tgt.append(other)

    asyncio.run(fill())
    code, _, err = cli(capsys, "copy", "--from", source, "--to", target)
    assert code == 2
    assert "'b'" in err and "refusing" in err
    assert set(asyncio.run(_snapshot(target))) == {"b"}  # "a" was not copied either

    async def direct() -> None:
        async with (
            await open_store(source, read_only=True) as src,
            await open_store(target) as tgt,
        ):
            with pytest.raises(CopyConflictError) as caught:
                await copy_module.copy_sessions(src, tgt, ["b"])
            assert caught.value.session_id == "b"

    asyncio.run(direct())


def test_a_count_mismatch_exits_1_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = f"sqlite:{tmp_path / 's.db'}"
    target = f"sqlite:{tmp_path / 't.db'}"

    async def fill() -> None:
        async with await open_store(source) as src:
            await src.append_many(chain("a", 4))
            await src.checkout("a", "a-1")

    asyncio.run(fill())
    real = copy_module.copy_sessions

    async def lossy(*args: Any, **kwargs: Any) -> list[copy_module.SessionCopy]:
        done = await real(*args, **kwargs)
        await args[1].checkout("a", "a-3")  # a target that ends elsewhere
        return done

    monkeypatch.setattr(copy_module, "copy_sessions", lossy)
    code, out, err = cli(capsys, "copy", "--from", source, "--to", target, "--json")
    assert code == 1
    assert json.loads(out)["verified"] is False
    assert "session 'a' leaf: source 'a-1', target 'a-3'" in err
