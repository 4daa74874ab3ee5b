"""Every worker run's tokens are recorded with its memory record, the provider's figures
when it reports them and our estimate (marked) when not, a failed run's on the next record;
the store read (memory records only) folds them as the entries' fold does, on every
adapter."""

from __future__ import annotations

from typing import Any

from prism_om.observational_memory.worker_usage import (
    fold_worker_usage,
    normalize_usage,
    store_worker_usage,
)
from prism_om.providers import ScriptedProvider
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.workers import create_observational_memory_runtime

REPORTED = {
    "prompt_tokens": 1200,
    "completion_tokens": 80,
    "prompt_tokens_details": {"cached_tokens": 1000},
}


def record_call(source: str) -> dict[str, Any]:
    observation = {"text": "Billing runs PostgreSQL 16.", "sourceEntryIds": [source]}
    return {
        "tool_call": {"name": "record_observations", "arguments": {"observations": [observation]}}
    }


def runtime(session: Session, provider: ScriptedProvider) -> Any:
    return create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        session_model="scripted",
        observation={"provider": provider},
    )


async def _records(store: SessionStore, sid: str) -> list[dict[str, Any]]:
    return [
        e.data
        for e in await store.entries(sid)
        if e.custom_type == "om.observations.recorded" and e.data is not None
    ]


async def test_reported_usage_is_written_with_the_record(store: SessionStore) -> None:
    session = Session(store, "paid")
    source = await session.append_message("user", "Billing moved to PostgreSQL 16.")
    provider = ScriptedProvider(
        [
            [record_call(source.id), {"done": {"stop_reason": "tool_calls", "usage": REPORTED}}],
            [
                {"text": "done"},
                {
                    "done": {
                        "stop_reason": "stop",
                        "usage": {**REPORTED, "prompt_tokens": 1300, "completion_tokens": 5},
                    }
                },
            ],
        ]
    )
    result = await runtime(session, provider).flush(force=True)
    assert result.status == "completed"
    (record,) = await _records(store, "paid")
    assert record["metadata"]["usage"] == [
        {
            "worker": "observer",
            "outcome": "completed",
            "runs": 1,
            "inputTokens": 2500,
            "outputTokens": 85,
            "cachedTokens": 2000,
            "estimated": False,
        }
    ]
    usage = await store_worker_usage(store, "paid")
    assert usage == fold_worker_usage(await store.entries("paid"))
    assert usage["workers"]["observer"]["inputTokens"] == 2500
    assert usage["total"]["estimated"] is False


async def test_a_provider_that_reports_nothing_is_estimated(store: SessionStore) -> None:
    session = Session(store, "free")
    source = await session.append_message("user", "Billing moved to PostgreSQL 16.")
    provider = ScriptedProvider([[record_call(source.id)], [{"text": "done"}]])
    await runtime(session, provider).flush(force=True)
    (record,) = await _records(store, "free")
    (item,) = record["metadata"]["usage"]
    assert item["estimated"] is True and item["inputTokens"] > 0 and item["outputTokens"] > 0


async def test_a_failed_runs_tokens_ride_on_the_next_record(store: SessionStore) -> None:
    session = Session(store, "retry")
    source = await session.append_message("user", "Billing moved to PostgreSQL 16.")
    failing = [{"tool_call": {"name": "no_such_tool", "arguments": {}}}]
    provider = ScriptedProvider(
        [
            failing,
            [record_call(source.id), {"done": {"stop_reason": "tool_calls", "usage": REPORTED}}],
            [{"text": "done"}],
        ]
    )
    memory = runtime(session, provider)
    first = await memory.flush(force=True)
    assert first.status == "failed"
    assert await _records(store, "retry") == []
    await memory.flush(force=True)
    (record,) = await _records(store, "retry")
    failed, completed = record["metadata"]["usage"]
    assert (failed["outcome"], failed["worker"], failed["estimated"]) == (
        "failed",
        "observer",
        True,
    )
    assert completed["outcome"] == "completed" and completed["cachedTokens"] == 1000
    usage = await store_worker_usage(store, "retry")
    assert usage["workers"]["observer"]["runs"] == 2
    assert usage["workers"]["observer"]["failedRuns"] == 1


def test_usage_shapes_of_the_common_providers() -> None:
    assert normalize_usage(REPORTED) == (1200, 80, 1000)
    anthropic = {"input_tokens": 900, "output_tokens": 40, "cache_read_input_tokens": 700}
    assert normalize_usage(anthropic) == (900, 40, 700)
    assert normalize_usage({"prompt_tokens": 5}) is None  # no output count: estimated
    assert normalize_usage(None) is None
