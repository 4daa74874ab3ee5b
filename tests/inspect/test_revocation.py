"""A tombstone written while the page is served counts on the next request."""

from __future__ import annotations

from prism_om.observational_memory.revocation import create_deletion_propagator
from prism_om.stores import open_store

from .conftest import Inspected


async def test_a_new_tombstone_withholds_at_once(inspected: Inspected) -> None:
    client, store = inspected.client, inspected.store
    first = (await store.ledger("demo")).observations[0].observation
    before = (await client.get("/s/demo/recall", params={"id": first.id})).text
    assert "billing service in Rust" in before
    # The observation cites the user's message; the assistant's word-for-word echo of it
    # ("Noted point 1: ...") is covered without being cited, so it is revoked by id too.
    echoes = [
        e.id
        for e in await store.entries("demo")
        if e.message is not None and "My name is Ada" in str(e.message.content)
    ]
    async with await open_store(store.url) as writer:
        propagate = create_deletion_propagator(writer).propagate
        await propagate("late", [*first.source_entry_ids, *echoes], reason="revoked")
    after = (await client.get("/s/demo/recall", params={"id": first.id})).text
    assert "[revoked]" in after and "billing service in Rust" not in after
    page = (await client.get("/s/demo")).text
    assert f'<li class="mem state-invalidated" id="m-{first.id}">' in page
    timeline = (await client.get("/s/demo/timeline", params={"limit": "200"})).text
    assert "My name is Ada" not in timeline
