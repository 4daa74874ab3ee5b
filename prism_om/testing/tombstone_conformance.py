"""The tombstone append rule (``prism_om.core.tombstones``), the same on every adapter.

Mixed into ``StoreConformance``: a ``tombstones.<scope>`` session takes only well-formed
``prism.tombstones.recorded`` records for its scope, and the record type goes nowhere
else. Each write path (``append``, ``append_many``, ``append_at_leaf``) refuses a record
that breaks the rule with ``TombstoneRecordError`` naming the entry and the field, and
leaves the store exactly as it was.
"""

from __future__ import annotations

from typing import Any

from ..core.tombstones import TOMBSTONES_RECORDED
from ..entries import SessionEntry, custom_entry
from ..errors import InvalidEntryError, TombstoneRecordError
from ..stores.base import SessionStore
from ._requires import pytest
from .generate import make_message

__all__ = ["MALFORMED_TOMBSTONE_DATA", "TombstoneConformance", "tombstone_data"]

_TS = "2026-11-30T09:00:00.000Z"
_SESSION = "tombstones.privacy"


def tombstone_data(**changes: Any) -> dict[str, Any]:
    """A well-formed record's data for scope ``privacy``, with ``changes`` (None drops a key)."""
    data: dict[str, Any] = {
        "type": TOMBSTONES_RECORDED,
        "scope": "privacy",
        "reason": "revoked",
        "ids": ["m-gone"],
    }
    for key, value in changes.items():
        if value is None and key in ("scope", "reason", "ids"):
            data.pop(key)
        else:
            data[key] = value
    return data


# name -> (data, the field the error names); every one is read as "skipped" too.
MALFORMED_TOMBSTONE_DATA: dict[str, tuple[dict[str, Any], str]] = {
    "ids null": ({**tombstone_data(), "ids": None}, "data.ids"),
    "ids missing": (tombstone_data(ids=None), "data.ids"),
    "ids an int": (tombstone_data(ids=7), "data.ids"),
    "ids one string": (tombstone_data(ids="m-gone"), "data.ids"),
    "an id not a string": (tombstone_data(ids=["m-gone", 5]), "data.ids[1]"),
    "an empty id": (tombstone_data(ids=[""]), "data.ids[0]"),
    "an id too long": (tombstone_data(ids=["x" * 257]), "data.ids[0]"),
    "ids above the cap": (tombstone_data(ids=[f"m{n}" for n in range(4097)]), "data.ids"),
    "reason a list": (tombstone_data(reason=["revoked"]), "data.reason"),
    "reason unknown": (tombstone_data(reason="forgotten"), "data.reason"),
    "reason missing": (tombstone_data(reason=None), "data.reason"),
    "scope of another session": (tombstone_data(scope="elsewhere"), "data.scope"),
    "scope missing": (tombstone_data(scope=None), "data.scope"),
    "scope a dict": (tombstone_data(scope={"a": 1}), "data.scope"),
}


def _record(data: dict[str, Any], entry_id: str, parent: str | None) -> SessionEntry:
    return custom_entry(_SESSION, data, parent_id=parent, entry_id=entry_id, timestamp=_TS)


async def _state(store: SessionStore) -> dict[str, object]:
    view: dict[str, object] = {"_sessions": await store.sessions()}
    for sid in (_SESSION, "s1"):
        view[sid] = ([e.to_wire() for e in await store.list(sid)], await store.leaf(sid))
    return view


class TombstoneConformance:
    """The tombstone append rule (uses the suite's ``store`` fixture)."""

    async def _refused(
        self, store: SessionStore, entry: SessionEntry, field: str, parent: str | None
    ) -> None:
        before = await _state(store)
        writes = (
            lambda: store.append(entry),
            lambda: store.append_many([entry]),
            lambda: store.append_at_leaf([entry]),
        )
        for write in writes:
            with pytest.raises(TombstoneRecordError) as info:
                await write()
            error = info.value
            assert isinstance(error, InvalidEntryError)
            assert error.entry_id == entry.id and error.field == field
            assert error.session_id == entry.session_id
            assert f"{entry.id!r}" in str(error) and field in str(error)
            assert await _state(store) == before

    async def test_a_well_formed_record_is_stored(self, store: SessionStore) -> None:
        await store.append(_record(tombstone_data(), "t1", None))
        await store.append_at_leaf([_record(tombstone_data(reason="corrected"), "t2", None)])
        assert [e.id for e in await store.list(_SESSION)] == ["t1", "t2"]

    @pytest.mark.parametrize("name", sorted(MALFORMED_TOMBSTONE_DATA))
    async def test_a_malformed_record_is_refused(self, store: SessionStore, name: str) -> None:
        await store.append(_record(tombstone_data(), "t1", None))
        data, field = MALFORMED_TOMBSTONE_DATA[name]
        await self._refused(store, _record(data, "bad", "t1"), field, "t1")
        # As the root of a new tombstone session too.
        await store.delete_session(_SESSION)
        await self._refused(store, _record(data, "bad", None), field, None)

    async def test_a_tombstone_session_holds_only_tombstone_records(
        self, store: SessionStore
    ) -> None:
        await store.append(_record(tombstone_data(), "t1", None))
        message = make_message(_SESSION, "msg", "t1", "user", "not a tombstone", 1)
        await self._refused(store, message, "kind", "t1")
        note = custom_entry(
            _SESSION, {"type": "app.note"}, parent_id="t1", entry_id="note", timestamp=_TS
        )
        await self._refused(store, note, "kind", "t1")
        # A batch with one bad entry stores none of it.
        good = _record(tombstone_data(ids=["m-2"]), "t2", "t1")
        with pytest.raises(TombstoneRecordError):
            await store.append_many([good, make_message(_SESSION, "msg", "t2", "user", "x", 2)])
        assert [e.id for e in await store.list(_SESSION)] == ["t1"]

    async def test_a_tombstone_session_needs_a_valid_scope_name(self, store: SessionStore) -> None:
        data = tombstone_data(scope="-x")
        entry = custom_entry("tombstones.-x", data, entry_id="t-bad", timestamp=_TS)
        before = await store.sessions()
        with pytest.raises(TombstoneRecordError) as info:
            await store.append(entry)
        assert info.value.field == "sessionId" and "'tombstones.-x'" in str(info.value)
        assert await store.sessions() == before

    async def test_a_tombstone_record_belongs_in_a_tombstone_session(
        self, store: SessionStore
    ) -> None:
        await store.append(make_message("s1", "m1", None, "user", "hello", 0))
        misplaced = custom_entry(
            "s1", tombstone_data(), parent_id="m1", entry_id="misplaced", timestamp=_TS
        )
        await self._refused(store, misplaced, "sessionId", "m1")
