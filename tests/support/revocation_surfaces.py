"""The revocation story and every surface that returns its text, for revocation tests.

``record_story`` writes one session whose memory repeats a passport number (an
observation over the message, a reflection resting on it, and a consolidation that
supersedes another reflection over it); ``revoke`` runs the standard flow (tombstone, then
the drop handler); ``every_surface`` collects what each text surface returns: the Python
context blocks, recall, the recall tool, paging, ``om:view`` / ``om:status``, the MCP
tools, every inspector page, and (for a store with a URL) the CLI's read commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from typing import Any

import httpx
from mcp import Client

from prism_om.cli import main as cli_main
from prism_om.inspect import create_inspect_app
from prism_om.mcp import create_mcp_server
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
    list_store_invalidated_ids,
)
from prism_om.session import Session
from prism_om.stores import SessionStore

PASSPORT = "X9-PASSPORT-771"
KEPT = "Releases go out on fridays."
O_REV, O_OK = "c00000000001", "c00000000002"
R_REV, R_OLD, R_CONS, R_OK = "d00000000001", "d00000000002", "d00000000003", "d00000000004"
MEMORY_IDS = (O_REV, R_REV, R_OLD, R_CONS)
STAMP = "2026-11-30T09:00:00.000Z"
PORT = 8787


async def record_story(store: SessionStore) -> dict[str, str]:
    session = Session(store, "s1")
    m1 = await session.append_message("user", f"My passport number is {PASSPORT}.")
    m2 = await session.append_message("assistant", "Noted.")
    m3 = await session.append_message("user", "We deploy on friday.")
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                {
                    "id": O_REV,
                    "text": f"User's passport is {PASSPORT}.",
                    "sourceEntryIds": [m1.id],
                    "observedAt": STAMP,
                },
                {
                    "id": O_OK,
                    "text": "Deploys happen on friday.",
                    "sourceEntryIds": [m3.id],
                    "observedAt": STAMP,
                },
            ],
            "coversUpToId": m3.id,
        }
    )
    await session.append_custom(
        {
            "type": "om.reflections.recorded",
            "reflections": [
                {
                    "id": R_REV,
                    "text": f"A traveller (passport {PASSPORT}) who ships on fridays.",
                    "observationIds": [O_REV, O_OK],
                },
                {
                    "id": R_OLD,
                    "text": f"Passport {PASSPORT} is on file.",
                    "observationIds": [O_REV],
                },
                {"id": R_OK, "text": KEPT, "observationIds": [O_OK]},
            ],
            "coversUpToId": m3.id,
        }
    )
    await session.append_custom(
        {
            "type": "om.reflections.recorded",
            "reflections": [
                {
                    "id": R_CONS,
                    "text": f"Consolidated: passport {PASSPORT}; deploys on friday.",
                    "observationIds": [O_OK],
                    "supersedesReflectionIds": [R_OLD],
                }
            ],
        }
    )
    return {"m1": m1.id, "m2": m2.id, "m3": m3.id}


async def revoke(store: SessionStore, ids: dict[str, str]) -> frozenset[str]:
    """The standard flow: the tombstone, then the drop handler drops the observation."""
    session = Session(store, "s1")
    handler = create_observational_memory_drop_handler(session=session, append_entry=session.append)
    await create_deletion_propagator(store, [handler])("privacy", [ids["m1"]], reason="revoked")
    ledger = await store.ledger("s1")
    assert O_REV in ledger.dropped_observation_ids  # the drop ran
    assert O_REV not in [r.id for r in (await store.live_ledger("s1")).observations]
    return await list_store_invalidated_ids(store)


def dumped(value: Any) -> str:
    if isinstance(value, str):
        return value
    if hasattr(value, "to_json"):
        value = value.to_json()
    return json.dumps(value, default=str)


async def library_surfaces(
    store: SessionStore, ids: dict[str, str], blocked: frozenset[str]
) -> dict[str, str]:
    out: dict[str, str] = {}
    blocks = await build_observational_memory_context_blocks(
        store, session_id="s1", invalidated_ids=blocked
    )
    out["context blocks"] = dumped([b.text for b in blocks])
    out["recall"] = dumped(
        [
            (
                await recall_observational_memory(
                    store, memory_id, session_id="s1", invalidated_ids=blocked
                )
            ).to_json()
            for memory_id in MEMORY_IDS
        ]
    )
    tool = create_recall_memory_tool(store=store, invalidated_ids=blocked)
    answers = [await tool.handler({"id": i}, session_id="s1") for i in MEMORY_IDS]
    answers.append(
        await tool.handler(
            {"cursor": ids["m3"], "direction": "backward", "detail": "full"}, session_id="s1"
        )
    )
    out["recall tool"] = dumped(answers)
    page = await recall_observational_memory_branch_page(
        store, ids["m3"], session_id="s1", direction="backward", detail="full",
        invalidated_ids=blocked,
    )  # fmt: skip
    out["page"] = dumped(page)
    commands = create_observational_memory_commands(store=store, invalidated_ids=blocked)
    status = await commands.status.run("", session_id="s1")
    out["om:status"] = dumped([status.text, status.data])
    views = [await commands.view.run(arg, session_id="s1") for arg in ("", "full")]
    out["om:view"] = dumped([[v.text, v.data] for v in views])
    return out


async def mcp_surfaces(store: SessionStore) -> dict[str, str]:
    server = create_mcp_server(store)
    out: dict[str, str] = {}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory_status", {"session_id": "s1"}),
        ("memory_view", {"session_id": "s1"}),
        ("memory_view", {"session_id": "s1", "mode": "full"}),
        *[("recall", {"session_id": "s1", "id": i}) for i in MEMORY_IDS],
        ("search_memory", {"session_id": "s1", "query": "passport"}),
        ("search_memory", {"session_id": "s1", "query": "friday"}),
    ]
    async with Client(server) as client:
        for name, args in calls:
            result = await client.call_tool(name, args)
            text = "".join(getattr(part, "text", "") for part in result.content)
            assert not result.is_error, text
            out[f"mcp {name}"] = out.get(f"mcp {name}", "") + text
    return out


async def inspector_surfaces(store: SessionStore) -> dict[str, str]:
    app = create_inspect_app(store, port=PORT)
    out: dict[str, str] = {}
    paths = [
        "/",
        "/s/s1",
        "/s/s1/timeline?limit=200",
        "/s/s1/charts",
        *[f"/s/s1/recall?id={i}" for i in MEMORY_IDS],
        "/s/s1/search?q=passport+friday",
    ]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://127.0.0.1:{PORT}") as c:
        for path in paths:
            response = await c.get(path)
            assert response.status_code == 200, (path, response.text)
            out[f"inspector {path.split('?')[0]}"] = (
                out.get(f"inspector {path.split('?')[0]}", "") + response.text
            )
    return out


def cli_surfaces(url: str, ids: dict[str, str]) -> dict[str, str]:
    """The CLI in this process, with its own store (opened from the URL, as a user runs it)."""
    base = ["--db", url, "--session", "s1"]
    runs = {
        "cli status": [["status", *base], ["status", *base, "--json"]],
        "cli view": [["view", *base], ["view", *base, "--full"], ["view", *base, "--json"]],
        "cli recall": [["recall", i, *base] for i in MEMORY_IDS]
        + [["recall", i, *base, "--json"] for i in MEMORY_IDS],
        "cli page": [
            ["page", *base, "--cursor", ids["m3"], "--backward"],
            ["page", *base, "--cursor", ids["m3"], "--backward", "--detail", "full", "--json"],
        ],
        "cli search": [
            ["search", "passport friday", *base],
            ["search", "passport", *base, "--json", "--include-inactive"],
        ],
    }
    out: dict[str, str] = {}
    for surface, argvs in runs.items():
        texts = []
        for argv in argvs:
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = cli_main(argv)
            assert code == 0, (argv, stdout.getvalue(), stderr.getvalue())
            texts.append(stdout.getvalue() + stderr.getvalue())
        out[surface] = "\n".join(texts)
    return out


async def every_surface(
    store: SessionStore, ids: dict[str, str], blocked: frozenset[str]
) -> dict[str, str]:
    out = await library_surfaces(store, ids, blocked)
    out |= await mcp_surfaces(store)
    out |= await inspector_surfaces(store)
    url = store.url
    if not url.startswith("memory:"):
        out |= await asyncio.to_thread(cli_surfaces, url, ids)
    return out


NO_TEXT_BEFORE = frozenset(
    {"inspector /", "inspector /s/s1/charts", "om:status", "mcp memory_status", "cli status"}
)
"""The surfaces that show no memory text by design, before anything is revoked."""
