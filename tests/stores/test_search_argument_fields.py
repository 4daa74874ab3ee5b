"""``store.search`` names the argument it refuses (docs/search.md: "every bad argument is
an InvalidInputError naming its field"), on every adapter, and a refused search changes
nothing: ``secrets`` and ``invalidated_ids`` once raised a bare ``TypeError`` or an error
with ``field=None``."""

from __future__ import annotations

from typing import Any

import pytest

from prism_om.entries import message_entry
from prism_om.errors import InvalidInputError, InvalidSessionIdError
from prism_om.stores import SessionStore

BAD_SECRETS: list[Any] = [5, "abc", b"abc", [None], ["ok", 7], [["nested"]]]
BAD_INVALIDATED_IDS: list[Any] = [5, 0, "m1", b"m1", [1], [None], [["m1"]]]


async def _seeded(store: SessionStore) -> None:
    first = message_entry("s1", "user", "The billing export runs every Friday.", entry_id="m1")
    reply = message_entry("s1", "assistant", "Noted: billing on Fridays.", parent_id="m1")
    await store.append_many([first, reply])


async def _state(store: SessionStore) -> tuple[list[str], list[Any]]:
    return await store.sessions(), [e.to_wire() for e in await store.entries("s1")]


async def _assert_refused(
    store: SessionStore, field: str, error: type[InvalidInputError], **arguments: Any
) -> None:
    await _seeded(store)
    before = await _state(store)
    with pytest.raises(error) as caught:
        await store.search(arguments.pop("session_id", "s1"), "billing", **arguments)
    assert caught.value.field == field, caught.value
    assert await _state(store) == before
    # The store still answers as it did: the refused call wrote nothing half-way.
    hits = await store.search("s1", "billing", kinds=["message"])
    assert {h.id for h in hits} == {e["id"] for e in before[1]}


@pytest.mark.parametrize("secrets", BAD_SECRETS, ids=repr)
async def test_bad_secrets_name_secrets(store: SessionStore, secrets: Any) -> None:
    await _assert_refused(store, "secrets", InvalidInputError, secrets=secrets)


@pytest.mark.parametrize("ids", BAD_INVALIDATED_IDS, ids=repr)
async def test_bad_invalidated_ids_name_invalidated_ids(store: SessionStore, ids: Any) -> None:
    await _assert_refused(store, "invalidated_ids", InvalidInputError, invalidated_ids=ids)


@pytest.mark.parametrize("session_id", ["", "../up", "a b", 7, None], ids=repr)
async def test_bad_session_id_names_session_id(store: SessionStore, session_id: Any) -> None:
    await _assert_refused(store, "session_id", InvalidSessionIdError, session_id=session_id)


async def test_an_iterator_of_ids_is_read_once(store: SessionStore) -> None:
    # The ids are checked and then kept: an iterator must not be exhausted by the check.
    await _seeded(store)
    hits = await store.search("s1", "billing", kinds=["message"], invalidated_ids=iter(["m1"]))
    assert "m1" not in {h.id for h in hits}
    assert hits  # the reply is still found
