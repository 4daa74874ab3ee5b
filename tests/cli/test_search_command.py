"""``prism-om search``: the JSON shape, the kinds and limits, withholding what the store's
tombstones revoke, redacting secrets, and its usage errors."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from prism_om.cli import main as cli_main
from prism_om.cli import output as cli_output
from prism_om.observational_memory.revocation import create_deletion_propagator
from prism_om.session import Session
from prism_om.stores.sqlite import SqliteStore

SECRET = "hunter2-zebra"


def run(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = cli_main(list(argv))
        except SystemExit as exc:  # argparse's usage errors exit
            code = int(exc.code or 0)
    return code, stdout.getvalue(), stderr.getvalue()


@pytest.fixture
async def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr(cli_output, "_STDOUT", None)
    monkeypatch.setattr(cli_output, "_STDERR", None)
    path = tmp_path / "store.db"
    async with await SqliteStore.open(path) as store:
        session = Session(store, "s1")
        export = await session.append_message("user", "The billing export runs every Friday.")
        await session.append_message("assistant", "Noted, the billing export is on Fridays.")
        lisbon = await session.append_message("user", f"Billing login for Lisbon is {SECRET}.")
        await session.append_custom(
            {
                "type": "om.observations.recorded",
                "observations": [
                    {
                        "id": "a00000000001",
                        "text": "The billing export runs every Friday.",
                        "sourceEntryIds": [export.id],
                    }
                ],
                "coversUpToId": lisbon.id,
            }
        )
        await create_deletion_propagator(store, [])("privacy", [lisbon.id], reason="revoked")
    return {"db": str(path), "export": export.id, "lisbon": lisbon.id}


def test_json_results_carry_kind_id_score_text_timestamp_and_sources(db: dict[str, str]) -> None:
    code, out, err = run("search", "billing export", "--db", db["db"], "--session", "s1", "--json")
    assert code == 0, err
    results = json.loads(out)["results"]
    assert set(json.loads(out)) == {"results"}
    assert {r["kind"] for r in results} == {"observation", "message"}
    for r in results:
        assert set(r) >= {"kind", "id", "score", "text", "timestamp", "sourceEntryIds"}
    observation = next(r for r in results if r["kind"] == "observation")
    assert observation["id"] == "a00000000001" and observation["sourceEntryIds"] == [db["export"]]
    # The store's tombstones withhold the revoked message: no hit, no text.
    assert db["lisbon"] not in out and "Lisbon" not in out
    code, out, _ = run("search", "lisbon", "--db", db["db"], "--session", "s1", "--json")
    assert code == 0 and json.loads(out) == {"results": []}
    # A scope without tombstones withholds nothing.
    code, out, _ = run(
        "search", "lisbon", "--db", db["db"], "--session", "s1", "--json",
        "--tombstone-scope", "elsewhere", "--secret", SECRET,
    )  # fmt: skip
    assert code == 0 and [r["id"] for r in json.loads(out)["results"]] == [db["lisbon"]]
    assert SECRET not in out and "[REDACTED]" in out


def test_kind_and_limit(db: dict[str, str]) -> None:
    base = ("--db", db["db"], "--session", "s1", "--json")
    code, out, _ = run("search", "billing", *base, "--kind", "message", "--limit", "1")
    assert code == 0
    results = json.loads(out)["results"]
    assert len(results) == 1 and results[0]["kind"] == "message"
    code, out, _ = run("search", "billing", *base, "--kind", "reflection")
    assert code == 0 and json.loads(out)["results"] == []


def test_text_output_names_each_hit_and_how_to_expand_it(db: dict[str, str]) -> None:
    code, out, err = run("search", "friday", "--db", db["db"], "--session", "s1")
    assert code == 0, err
    assert "a00000000001" in out and db["export"] in out and "prism-om recall ID" in out


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--limit", "101"], "--limit"),
        (["--limit", "0"], "--limit"),
        (["--kind", "memory"], "--kind"),
    ],
)
def test_usage_errors(db: dict[str, str], extra: list[str], needle: str) -> None:
    code, _, err = run("search", "billing", "--db", db["db"], "--session", "s1", *extra)
    assert code == 2 and needle in err and "Traceback" not in err


def test_bad_queries_and_sessions_are_one_line_errors(db: dict[str, str]) -> None:
    code, _, err = run("search", "x" * 501, "--db", db["db"], "--session", "s1")
    assert code != 0 and "500" in err and len(err.strip().splitlines()) == 1
    code, _, err = run("search", "billing", "--db", db["db"], "--session", "nobody")
    assert code != 0 and "nobody" in err
