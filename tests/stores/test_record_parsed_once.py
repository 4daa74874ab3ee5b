"""An ``om.*`` record is parsed once per append on SQLite and PostgreSQL.

Validation parses the record to learn what the branch must confirm; the fold rows the
append then writes are built from that parse (they parsed the record again before).
Counted, not timed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.data import SESSION_ID, build_dataset, continuation
from prism_om.core import parse as parse_module
from prism_om.core import validation as validation_module
from prism_om.core.records import OBSERVATIONS_RECORDED
from prism_om.entries import custom_entry
from prism_om.stores.sql import memory_folds as folds_module
from prism_om.stores.sql import placement as placement_module
from prism_om.testing.conformance import StoreOpener

MEMORY_ID = "0000000000ab"


def observation_record(data: Any, entry_id: str, parent_id: str) -> Any:
    source = data.entries[-2]
    return custom_entry(
        SESSION_ID,
        {
            "type": OBSERVATIONS_RECORDED,
            "observations": [
                {
                    "id": MEMORY_ID,
                    "text": "observed once",
                    "sourceEntryIds": [source.id],
                    "priority": "low",
                }
            ],
            "coversUpToId": source.id,
        },
        parent_id=parent_id,
        entry_id=entry_id,
        timestamp=source.timestamp,
    )


@pytest.fixture(params=["sqlite", "postgres"])
async def store(
    request: pytest.FixtureRequest, make_opener: Callable[[str], StoreOpener], tmp_path: Path
) -> Any:
    data = build_dataset(300)
    (tmp_path / request.param).mkdir()
    opened = await make_opener(request.param).open()
    try:
        await opened.append_many(data.entries)
        yield opened, data
    finally:
        await opened.close()


async def test_a_memory_record_is_parsed_once_per_append(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, data = store
    parsed: list[str] = []
    real = parse_module.parse_memory_record

    def counting(entry: Any) -> Any:
        parsed.append(entry.id)
        return real(entry)

    for module in (placement_module, folds_module, validation_module):
        monkeypatch.setattr(module, "parse_memory_record", counting, raising=False)
    record = observation_record(data, "rec", data.last_id)
    await s.append(record)
    # Validation parses it; the fold rows reuse that parse (they parsed it again before).
    assert parsed == ["rec"]
    ledger = await s.ledger(SESSION_ID)
    (newest,) = [o for o in ledger.observations if o.observation.id == MEMORY_ID]
    # Recorded without observedAt: dated by its source, found in the store.
    assert newest.observation.observed_at == data.entries[-2].timestamp


async def test_a_record_dated_by_a_source_in_its_own_batch(store: Any) -> None:
    s, data = store
    (message,) = continuation(data, 1, "x")
    source = message.model_copy(update={"timestamp": "2026-06-01T12:00:00.000Z"})
    record = observation_record(data, "rec", source.id)
    payload = dict(record.data)
    payload["observations"] = [{**payload["observations"][0], "sourceEntryIds": [source.id]}]
    payload["coversUpToId"] = source.id
    record = record.model_copy(update={"data": payload, "timestamp": source.timestamp})
    await s.append_many([source, record])
    ledger = await s.ledger(SESSION_ID)
    (newest,) = [o for o in ledger.observations if o.observation.id == MEMORY_ID]
    # The message that dates it is placed with the batch, not read from the store.
    assert newest.observation.observed_at == source.timestamp
