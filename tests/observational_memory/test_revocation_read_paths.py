"""Issue 12 item 1: every read path withholds the same memory for one tombstone set.

One session records a message carrying an SSN, an observation and a reflection that
repeat it, and an unrelated observation the dropper retired. A deletion propagator with
the memory drop handler then revokes the SSN message. Every read path — the attached and
the bare recall tool, ``recall_observational_memory``, branch paging, ``om:view``,
``om:status``, the context blocks, the compaction summary, and the CLI's ``view`` /
``recall`` / ``page`` / ``status`` / ``compact`` — must then withhold it: ``reason:
"revoked"``, ``[revoked]`` with the id in text output, and the SSN nowhere. The dropped
(not revoked) observation still answers with its raw sources.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prism_om.attach import create_observational_memory
from prism_om.cli import main as cli_main
from prism_om.cli import output as cli_output
from prism_om.host import Agent
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    create_observational_memory_commands,
    create_recall_memory_tool,
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.observational_memory.revocation import (
    create_deletion_propagator,
    create_observational_memory_drop_handler,
    list_invalidated_ids,
    list_store_invalidated_ids,
    list_tombstone_scopes,
)
from prism_om.providers import ScriptedProvider
from prism_om.session import Session
from prism_om.stores import SessionStore, open_store
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OfflineMemoryProvider

SSN = "123-45-6789"
SCOPE = "tenant-a"
O_SSN, O_DEPLOY, O_LUNCH = "a00000000001", "a00000000002", "a00000000003"
R_SSN, R_DEPLOY = "b00000000001", "b00000000002"
STAMP = "2026-11-30T09:00:00.000Z"

pytestmark = pytest.mark.filterwarnings("error")


def observation(oid: str, text: str, sources: list[str]) -> dict[str, Any]:
    return {"id": oid, "text": text, "sourceEntryIds": sources, "observedAt": STAMP}


async def record_story(store: SessionStore) -> dict[str, str]:
    """The session, observed and reflected; O_LUNCH dropped by the dropper (not revoked)."""
    session = Session(store, "s1")
    m1 = await session.append_message("user", f"My SSN is {SSN}; please file the tax form.")
    m2 = await session.append_message("assistant", "Filed the tax form.")
    m3 = await session.append_message("user", "We deploy on friday.")
    m4 = await session.append_message("user", "Lunch was pasta carbonara.")
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                observation(O_SSN, f"User's SSN is {SSN}; the tax form was filed.", [m1.id, m2.id]),
                observation(O_DEPLOY, "Deploys happen on friday.", [m3.id]),
                observation(O_LUNCH, "User had pasta for lunch.", [m4.id]),
            ],
            "coversUpToId": m4.id,
        }
    )
    await session.append_custom(
        {
            "type": "om.reflections.recorded",
            "reflections": [
                {
                    "id": R_SSN,
                    "text": f"User (SSN {SSN}) files taxes and ships on fridays.",
                    "observationIds": [O_SSN, O_DEPLOY],
                },
                {
                    "id": R_DEPLOY,
                    "text": "Releases go out on fridays.",
                    "observationIds": [O_DEPLOY],
                },
            ],
            "coversUpToId": m4.id,
        }
    )
    await session.append_custom(
        {"type": "om.observations.dropped", "observationIds": [O_LUNCH], "coversUpToId": m4.id}
    )
    return {"m1": m1.id, "m2": m2.id, "m3": m3.id, "m4": m4.id}


def attach(store: SessionStore, invalidated: Any) -> Any:
    agent = Agent(Session(store, "s1"), ScriptedProvider(then="stop"))
    offline = OfflineMemoryProvider()
    memory = create_observational_memory(
        {
            "observation": {"provider": offline, "model": "offline"},
            "context": {"recent_messages": 8},
        },
        invalidated_ids=invalidated,
    )
    return memory.attach(agent)


def dumped(value: Any) -> str:
    if isinstance(value, str):
        return value
    if hasattr(value, "to_json"):
        value = value.to_json()
    return json.dumps(value, default=str)


async def revoke(store: SessionStore, ids: dict[str, str]) -> frozenset[str]:
    """Run the drop handler for one tombstone set; return the read path's set."""
    session = Session(store, "s1")
    handler = create_observational_memory_drop_handler(session=session, append_entry=session.append)
    await create_deletion_propagator(store, [handler])(SCOPE, [ids["m1"]], reason="revoked")
    # An unrelated scope, so --tombstone-scope has something to choose between.
    await create_deletion_propagator(store, [])("other", ["zz-unrelated"], reason="revoked")
    blocked = await list_invalidated_ids(store, SCOPE)
    assert blocked == {ids["m1"]}
    assert await list_tombstone_scopes(store) == [SCOPE, "other"]
    assert await list_store_invalidated_ids(store) == {ids["m1"], "zz-unrelated"}
    return blocked


async def library_paths(store: SessionStore, ids: dict[str, str], blocked: frozenset[str]) -> None:
    attached = attach(store, lambda: list_invalidated_ids(store, SCOPE))
    session = Session(store, "s1")
    entries = await session.entries()
    outputs: list[Any] = []

    def withheld(answer: dict[str, Any]) -> None:
        assert answer["found"] is False and answer["reason"] == "revoked", answer
        assert set(answer) == {"id", "kind", "found", "reason"}  # no derived text at all
        outputs.append(answer)

    tools = [
        attached.recall_tool(),
        create_recall_memory_tool(store=store, invalidated_ids=blocked),
    ]
    tools.append(
        create_recall_memory_tool(get_entries=lambda sid: entries, invalidated_ids=blocked)
    )
    for tool in tools:
        for memory_id in (O_SSN, R_SSN):
            withheld(await tool.handler({"id": memory_id}, session_id="s1"))
        assert (await tool.handler({"id": R_DEPLOY}, session_id="s1"))["found"] is True
        for detail in ("summary", "full"):
            page = await tool.handler(
                {"cursor": ids["m4"], "direction": "backward", "detail": detail}, session_id="s1"
            )
            first = page["messages"][0]
            assert first == {
                "id": ids["m1"],
                "role": "user",
                "timestamp": first["timestamp"],
                "reason": "revoked",
            }
            assert "Filed the tax form." in dumped(page)  # the other messages stay
            outputs.append(page)

    for memory_id in (O_SSN, R_SSN):
        withheld(
            (
                await recall_observational_memory(
                    store, memory_id, session_id="s1", invalidated_ids=blocked
                )
            ).to_json()
        )
        withheld(recall_observational_memory(entries, memory_id, invalidated_ids=blocked).to_json())
    pages = [
        await recall_observational_memory_branch_page(
            store, ids["m2"], session_id="s1", direction="backward", invalidated_ids=blocked
        ),
        recall_observational_memory_branch_page(
            entries, ids["m2"], direction="backward", detail="full", invalidated_ids=blocked
        ),
    ]
    for page in pages:
        assert page.messages[0]["reason"] == "revoked"
    outputs += pages

    blocks = await attached.context_provider.blocks(session)
    recent = next(b for b in blocks if b.name == "recent-messages")
    assert f"{ids['m1']} " in recent.text and "[revoked]" in recent.text
    assert "Releases go out on fridays." in dumped([b.text for b in blocks])
    outputs += [b.text for b in blocks]
    bare = await build_observational_memory_context_blocks(
        store, session_id="s1", invalidated_ids=blocked
    )
    outputs += [b.text for b in bare]
    outputs += [
        b.text for b in build_observational_memory_context_blocks(entries, invalidated_ids=blocked)
    ]

    command_sets = [
        attached.commands(),
        create_observational_memory_commands(store=store, invalidated_ids=blocked),
    ]
    for commands in command_sets:
        status = await commands.status.run("", session_id="s1")
        assert status.data["revoked"] == {"observationIds": [O_SSN], "reflectionIds": [R_SSN]}
        assert status.data["observations"]["active"] == 1  # O_DEPLOY; O_LUNCH was dropped
        for result in (
            status,
            await commands.view.run("", session_id="s1"),
            await commands.view.run("full", session_id="s1"),
        ):
            assert f"[revoked] {O_SSN}" in result.text and f"[revoked] {R_SSN}" in result.text
            outputs += [result.text, result.data]

    # The dropped, not revoked, observation still answers with its raw source.
    for tool in tools:
        lunch = await tool.handler({"id": O_LUNCH}, session_id="s1")
        assert lunch["found"] is True and lunch["dropped"] is True
        assert [s["id"] for s in lunch["sources"]] == [ids["m4"]]
        assert "pasta carbonara" in dumped(lunch["sources"])

    # Compaction last: it appends. The agent's own compact and the attached strategy
    # passed by hand both withhold (attach registers on the agent: there is no proxy).
    for compaction in (
        await attached.agent.compact(),
        await attached.agent.compact(attached.strategy),
    ):
        assert R_SSN not in compaction.summary
        assert "Releases go out on fridays." in compaction.summary
        outputs += [compaction.summary, compaction.data]

    for output in outputs:
        assert SSN not in dumped(output), output


async def before_revocation_the_ssn_is_reachable(store: SessionStore) -> None:
    """Guards the test itself: without the tombstones the SSN does come back."""
    tool = attach(store, None).recall_tool()
    answer = await tool.handler({"id": R_SSN}, session_id="s1")
    assert answer["found"] is True and SSN in dumped(answer)


async def test_every_library_read_path_withholds(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        ids = await record_story(store)
        await before_revocation_the_ssn_is_reachable(store)
        blocked = await revoke(store, ids)
        await library_paths(store, ids, blocked)
    finally:
        await store.close()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli_main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


async def _prepare(url: str, *, revoked: bool = True) -> dict[str, str]:
    store = await open_store(url)
    try:
        ids = await record_story(store)
        if revoked:
            await revoke(store, ids)
        return ids
    finally:
        await store.close()


async def _check_store(url: str, check: Callable[[SessionStore], Any]) -> None:
    store = await open_store(url)
    try:
        await check(store)
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_the_cli_read_commands_withhold(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Wide enough that a table never folds an entry id across lines.
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(cli_output, "_STDOUT", None)
    monkeypatch.setattr(cli_output, "_STDERR", None)
    url = f"sqlite:{tmp_path / 'store.db'}" if kind == "sqlite" else f"jsonl:{tmp_path / 'store'}"
    ids = asyncio.run(_prepare(url))
    base = ["--db", url, "--session", "s1"]
    outputs: list[str] = []

    def ok(*argv: str) -> str:
        code, out = run_cli(capsys, *argv)
        assert code == 0, out
        outputs.append(out)
        return out

    for scoped in ([], ["--tombstone-scope", SCOPE], ["--tombstone-scope", SCOPE] * 2):
        status = ok("status", *base, *scoped)
        assert f"[revoked] {O_SSN}" in status and f"[revoked] {R_SSN}" in status
        for extra in ([], ["--full"]):
            view = ok("view", *base, *extra, *scoped)
            assert f"[revoked] {O_SSN}" in view and f"[revoked] {R_SSN}" in view
            assert "Releases go out on fridays." in view
        for memory_id in (O_SSN, R_SSN):
            assert f"[revoked] {memory_id}" in ok("recall", memory_id, *base, *scoped)
            answer = json.loads(ok("recall", memory_id, *base, "--json", *scoped))
            assert answer == {
                "id": memory_id,
                "kind": answer["kind"],
                "found": False,
                "reason": "revoked",
            }
        page = ok("page", *base, "--cursor", ids["m4"], "--backward", *scoped)
        assert ids["m1"] in page and "[revoked]" in page and "Filed the tax form." in page
        full = json.loads(
            ok(
                "page",
                *base,
                "--cursor",
                ids["m4"],
                "--backward",
                "--detail",
                "full",
                "--json",
                *scoped,
            )
        )
        assert full["messages"][0] == {
            "id": ids["m1"],
            "role": "user",
            "timestamp": full["messages"][0]["timestamp"],
            "reason": "revoked",
        }
        view_json = json.loads(ok("view", *base, "--json", *scoped))
        assert view_json["revokedIds"] == [R_SSN, O_SSN]

    # The dropped (not revoked) observation still shows its raw source.
    lunch = ok("recall", O_LUNCH, *base)
    assert "pasta carbonara" in lunch and ids["m4"] in lunch

    compact = ok("compact", *base, "--json")
    assert compact

    async def summary_has_no_ssn(store: SessionStore) -> None:
        last = await store.last_compaction("s1")
        assert last is not None and SSN not in last.summary + json.dumps(last.data)
        assert "Releases go out on fridays." in last.summary

    asyncio.run(_check_store(url, summary_has_no_ssn))
    for out in outputs:
        assert SSN not in out, out

    # Naming only an unrelated scope withholds only that scope's ids: the filter is real.
    code, other = run_cli(capsys, "recall", R_SSN, *base, "--tombstone-scope", "other")
    assert code == 0 and SSN in other
    code, missing = run_cli(capsys, "status", *base, "--tombstone-scope", "nobody")
    assert code == 0 and "no tombstones for scope 'nobody'" in missing
    code, bad = run_cli(capsys, "status", *base, "--tombstone-scope", "../x")
    assert code == 2 and "prism-om: error:" in bad
