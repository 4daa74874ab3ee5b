"""Conformance tests for the store's hard bounds (entry size, record caps), every adapter.

``StoreConformance`` inherits ``BoundsConformance``, so an adapter that runs the suite
runs these too: each cap is refused with the same typed error, naming the entry, before
anything is stored.
"""

from __future__ import annotations

from typing import Any

from ..core.limits import (
    MAX_ENTRY_BYTES,
    MAX_OBSERVATIONS_PER_REFLECTION,
    MAX_SOURCES_PER_OBSERVATION,
)
from ..core.records import OBSERVATIONS_RECORDED, REFLECTIONS_RECORDED
from ..entries import SessionEntry, custom_entry, entry_from_wire, entry_wire_bytes
from ..errors import EntryTooLargeError, MemoryRecordTooLargeError
from ..stores.base import SessionStore
from ._requires import pytest
from .generate import make_message

__all__ = ["BoundsConformance"]

_TS = "2024-05-01T10:00:00Z"


def _memory_id(n: int) -> str:
    return f"{n:012x}"


def _chain(sid: str, count: int, prefix: str = "m") -> list[SessionEntry]:
    return [
        make_message(sid, f"{prefix}{i}", f"{prefix}{i - 1}" if i else None, "user", "hi", i)
        for i in range(count)
    ]


def _observations(parent: str, items: list[dict[str, Any]], eid: str) -> SessionEntry:
    data = {"type": OBSERVATIONS_RECORDED, "observations": items}
    return custom_entry("s1", data, parent_id=parent, entry_id=eid, timestamp=_TS)


def _observation(n: int, sources: list[str]) -> dict[str, Any]:
    return {"id": _memory_id(n), "text": "fact", "sourceEntryIds": sources, "observedAt": _TS}


def _sized_message(eid: str, parent: str, size: int, unit: str = "x") -> SessionEntry:
    """A message whose serialised wire JSON is exactly ``size`` bytes (``unit`` ASCII)."""
    wire: dict[str, Any] = {
        "id": eid,
        "sessionId": "s1",
        "parentId": parent,
        "kind": "message",
        "timestamp": _TS,
        "message": {"role": "user", "content": ""},
    }
    envelope = entry_wire_bytes(entry_from_wire(wire))
    wire["message"]["content"] = unit * (size - envelope)
    return entry_from_wire(wire)


async def _ids(store: SessionStore) -> list[str]:
    return [e.id for e in await store.list("s1")]


class BoundsConformance:
    """Hard caps every adapter enforces identically (uses the suite's ``store`` fixture)."""

    async def test_sources_per_observation_cap(self, store: SessionStore) -> None:
        cap = MAX_SOURCES_PER_OBSERVATION
        chain = _chain("s1", cap + 1)
        await store.append_many(chain)
        sources = [e.id for e in chain]
        too_many = _observations(chain[-1].id, [_observation(1, sources)], "rec-big")
        with pytest.raises(MemoryRecordTooLargeError) as info:
            await store.append(too_many)
        message = str(info.value)
        assert "'rec-big'" in message and "data.observations[0].sourceEntryIds" in message
        assert f"{cap + 1} ids" in message and str(cap) in message
        assert await _ids(store) == sources and await store.leaf("s1") == chain[-1].id
        # Exactly at the cap is fine.
        await store.append(_observations(chain[-1].id, [_observation(1, sources[:cap])], "ok"))
        assert await store.leaf("s1") == "ok"

    async def test_observations_per_reflection_cap(self, store: SessionStore) -> None:
        cap = MAX_OBSERVATIONS_PER_REFLECTION
        await store.append(make_message("s1", "m0", None, "user", "hi", 0))
        observed = _observations("m0", [_observation(n, ["m0"]) for n in range(cap + 1)], "obs")
        await store.append(observed)

        def reflection(count: int, eid: str) -> SessionEntry:
            data = {
                "type": REFLECTIONS_RECORDED,
                "reflections": [
                    {
                        "id": _memory_id(10**9),
                        "text": "summary",
                        "observationIds": [_memory_id(n) for n in range(count)],
                    }
                ],
            }
            return custom_entry("s1", data, parent_id="obs", entry_id=eid, timestamp=_TS)

        with pytest.raises(MemoryRecordTooLargeError) as info:
            await store.append(reflection(cap + 1, "refl-big"))
        message = str(info.value)
        assert "'refl-big'" in message and "data.reflections[0].observationIds" in message
        assert await _ids(store) == ["m0", "obs"] and await store.leaf("s1") == "obs"
        await store.append(reflection(cap, "refl-ok"))
        assert await store.leaf("s1") == "refl-ok"

    async def test_entry_size_cap(self, store: SessionStore) -> None:
        await store.append(make_message("s1", "m0", None, "user", "hi", 0))
        at_cap = _sized_message("at-cap", "m0", MAX_ENTRY_BYTES)
        assert entry_wire_bytes(at_cap) == MAX_ENTRY_BYTES
        over = _sized_message("over", "m0", MAX_ENTRY_BYTES + 1)
        with pytest.raises(EntryTooLargeError) as info:
            await store.append(over)
        assert "'over'" in str(info.value) and f"{MAX_ENTRY_BYTES + 1:,} bytes" in str(info.value)
        # A batch holding one oversized entry stores none of it.
        small = make_message("s1", "small", "m0", "user", "fine", 1)
        with pytest.raises(EntryTooLargeError):
            await store.append_many([small, _sized_message("over2", "small", MAX_ENTRY_BYTES + 1)])
        assert await _ids(store) == ["m0"] and await store.leaf("s1") == "m0"
        await store.append(at_cap)
        got = await store.get("at-cap")
        assert got is not None and entry_wire_bytes(got) == MAX_ENTRY_BYTES

    async def test_entry_size_counts_escapes_and_structure(self, store: SessionStore) -> None:
        """The cap is on serialised bytes: escaped control characters and custom data count."""
        await store.append(make_message("s1", "m0", None, "user", "hi", 0))
        # Each \x01 serialises as the six bytes \u0001: few characters, many bytes.
        escaped = make_message("s1", "esc", "m0", "user", "\x01" * (MAX_ENTRY_BYTES // 6 + 1), 1)
        assert len(escaped.message.content) < MAX_ENTRY_BYTES // 5  # type: ignore[union-attr]
        with pytest.raises(EntryTooLargeError, match="'esc'"):
            await store.append(escaped)
        blob = {"type": "host.blob", "payload": "y" * MAX_ENTRY_BYTES}
        with pytest.raises(EntryTooLargeError, match="'blob'"):
            await store.append(custom_entry("s1", blob, parent_id="m0", entry_id="blob"))
        assert await _ids(store) == ["m0"]
