"""A SQLite search that must index first runs twice: values given as iterators count both
times. The first search of a session leaves the reader's thread to index its messages and
runs again; a secret passed as a generator must still be redacted in the second run."""

from __future__ import annotations

from pathlib import Path

import pytest

from prism_om.entries import message_entry
from prism_om.stores.sqlite import SqliteStore

SECRET = "sk-live-4f9c2b7a91d0"


@pytest.mark.parametrize("kinds_too", [False, True])
async def test_a_generator_of_secrets_redacts_the_first_search(
    tmp_path: Path, kinds_too: bool
) -> None:
    async with await SqliteStore.open(tmp_path / "s.db") as store:
        first = message_entry("s", "user", f"the billing export key is {SECRET} for now")
        second = message_entry("s", "assistant", "noted the billing export key", parent_id=first.id)
        await store.append_many([first, second])
        # Nothing is indexed yet: this search indexes the messages, then runs again.
        kinds = iter(["message"]) if kinds_too else None
        hits = await store.search(
            "s", "billing export key", secrets=(s for s in [SECRET]), kinds=kinds
        )
        assert {hit.id for hit in hits} == {first.id, second.id}
        assert all(SECRET not in hit.text for hit in hits), [hit.text for hit in hits]
