"""Issue 28 item 1: the standard revocation flow withholds on every surface that returns text.

One session holds a message with a passport number, an observation over it, a reflection
resting on that observation, and a consolidation that supersedes another reflection over
it (the consolidation itself cites only an unrelated observation). The standard flow then
revokes the message: ``create_deletion_propagator`` writes the tombstone and the memory
drop handler drops the observation. After that the revoked text must come back from no
surface: the Python context blocks, recall, the recall tool, paging, ``om:view`` /
``om:status``, the CLI's ``status`` / ``view`` / ``recall`` / ``page``, the MCP server's
``memory_status`` / ``memory_view`` / ``recall`` / ``search_memory``, and every inspector
page. The dropped observation is gone from the live ledger, so a surface judging on it
alone cannot see what the reflections rest on: it must apply the shared rule on the full
ledger. Before the revocation each surface does show the text (the sweep is no vacuous
pass), and an unrelated reflection stays visible after it.
"""

from __future__ import annotations

import pytest
from support.revocation_surfaces import (
    KEPT,
    NO_TEXT_BEFORE,
    PASSPORT,
    R_CONS,
    every_surface,
    record_story,
    revoke,
)

from prism_om.cli import output as cli_output
from prism_om.testing.conformance import StoreOpener

pytestmark = pytest.mark.filterwarnings("error")


async def test_the_revocation_flow_withholds_on_every_surface(
    store_opener: StoreOpener, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Wide enough that a table never folds an id or the phrase across lines.
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(cli_output, "_STDOUT", None)
    monkeypatch.setattr(cli_output, "_STDERR", None)
    store = await store_opener.open()
    try:
        ids = await record_story(store)
        before = await every_surface(store, ids, frozenset())
        for surface, text in before.items():
            if surface not in NO_TEXT_BEFORE:
                assert PASSPORT in text, f"{surface} never showed the text: the check is vacuous"
        blocked = await revoke(store, ids)
        after = await every_surface(store, ids, blocked)
        assert set(after) == set(before)
        leaked = [surface for surface, text in after.items() if PASSPORT in text]
        assert not leaked, {s: after[s] for s in leaked}
        for surface in (
            "context blocks",
            "om:view",
            "mcp memory_view",
            "mcp search_memory",
            "cli search",  # not for the in-memory store, which no command can open
        ):
            assert surface not in before or KEPT in after[surface], surface
        assert R_CONS in after["om:view"] and f"[revoked] {R_CONS}" in after["om:view"]
    finally:
        await store.close()
