"""``encode_batch`` (issue 16, append_many of 100): a plain message's body and token count
taken in one loop without the two calls per entry, and always what ``payload_json`` and
``count_entry`` give."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.data import build_dataset, continuation
from prism_om.entries import Message, SessionEntry, message_entry
from prism_om.stores._rows import payload_json
from prism_om.stores.sql import placement as placement_module
from prism_om.stores.sql.placement import encode_batch
from prism_om.tokens import HEURISTIC_ENCODING, TokenEstimator, get_estimator
from tests.stores.test_sqlite_append_batch_work import message_wires


def test_a_batch_of_plain_messages_makes_no_per_entry_encode_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = continuation(build_dataset(50), 100, "x")
    estimator = get_estimator()
    expected = [(payload_json(e), estimator.count_entry(e)) for e in batch]
    calls: list[str] = []

    def counting(entry: SessionEntry) -> str:
        calls.append(entry.id)
        return payload_json(entry)

    monkeypatch.setattr(placement_module, "payload_json", counting)
    assert encode_batch(batch, estimator) == expected
    # One payload_json (and one count_entry) call per entry before.
    assert calls == []


@settings(max_examples=300, deadline=None)
@given(
    wires=st.lists(message_wires(), max_size=4),
    custom=st.booleans(),
    heuristic=st.booleans(),
)
def test_encode_batch_is_payload_json_and_count_entry(
    wires: list[dict[str, Any]], custom: bool, heuristic: bool
) -> None:
    base = message_entry("s", "user", "x", entry_id="e", timestamp="2026-06-01T00:00:00Z")
    batch = [base.model_copy(update={"message": Message.model_validate(w)}) for w in wires]
    if custom:
        batch.append(
            SessionEntry(
                id="c", session_id="s", kind="custom", timestamp=base.timestamp, data={"type": "t"}
            )
        )
    estimator = get_estimator(HEURISTIC_ENCODING) if heuristic else get_estimator()
    assert encode_batch(batch, estimator) == [
        (payload_json(e), estimator.count_entry(e)) for e in batch
    ]


@dataclass(frozen=True)
class _OwnCount(TokenEstimator):
    def count_entry(self, entry: SessionEntry) -> int:
        return 7


def test_an_estimator_that_counts_entries_its_own_way_is_asked() -> None:
    batch = continuation(build_dataset(50), 3, "x")
    estimator = _OwnCount("own", len)
    assert encode_batch(batch, estimator) == [(payload_json(e), 7) for e in batch]
