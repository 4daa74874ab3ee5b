"""The offline extractive provider: no network, no credentials, deterministic memory."""

from __future__ import annotations

from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.workers import (
    OFFLINE_MODEL,
    OfflineMemoryProvider,
    create_observational_memory_runtime,
)
from prism_om.workers.offline import extract_observations
from prism_om.workers.transcript import ParsedEntry

T = "2024-05-01T09:00:00Z"  # a Wednesday


def test_extraction_skips_chatter_and_ranks_assertions() -> None:
    found = extract_observations(
        [
            ParsedEntry("m1", "user", T, "Hi there! Thanks."),
            ParsedEntry("m2", "user", T, "We decided to ship on Friday. My name is Dana."),
            ParsedEntry("m3", "user", T, "What do you think?"),
            ParsedEntry("m4", "user", T, "Should the Postgres cutover move to tomorrow?"),
            ParsedEntry("m5", "tool", T, "raw tool output 42"),
        ]
    )
    texts = [f["text"] for f in found]
    # Chatter and a question that names nothing are dropped; a message's statements merge
    # into one terse observation; tool output is summarised.
    assert texts == [
        "User: decided ship Friday (3 May 2024); name Dana.",
        "User: asked Should Postgres cutover move tomorrow (2 May 2024).",
        "Tool result: raw tool output 42",
    ]
    assert found[0]["priority"] == "high" and found[0]["referencedDate"] == "2024-05-03"
    assert found[1]["priority"] == "low"
    assert found[2]["priority"] == "low"
    assert all(f["sourceEntryIds"] for f in found)


async def test_offline_flush_observes_reflects_and_is_deterministic() -> None:
    async def build() -> list[tuple[str, list[str]]]:
        session = Session(MemoryStore(), "s1")
        await session.append_message(
            "user", "The billing migration deadline is 2024-06-14.", timestamp=T
        )
        await session.append_message(
            "assistant", "The billing migration runs on Postgres 16.", timestamp=T
        )
        await session.append_message("user", "Thanks!", timestamp=T)
        provider = OfflineMemoryProvider()
        rt = create_observational_memory_runtime(
            session=session,
            append_entry=session.append,
            observation={"provider": provider},
            reflection={"provider": provider},
            dropper={"policy": "lowest-relevance"},
            session_model=OFFLINE_MODEL,
        )
        result = await rt.flush(force=True)
        assert result.status == "completed"
        ledger = await session.store.ledger(session.id)
        assert ledger.reflections and ledger.reflection_coverage is not None
        return [(r.observation.text, r.observation.source_entry_ids) for r in ledger.observations]

    first, second = await build(), await build()
    assert [t for t, _ in first] == [t for t, _ in second]
    assert [t for t, _ in first] == [
        "User: Billing migration deadline 2024-06-14.",
        "Assistant: Billing migration runs Postgres 16.",
    ]


def test_a_tool_call_line_nested_past_the_json_parser_is_read_as_prose() -> None:
    line = 'search({"q": ' + "[" * 100_000 + "]" * 100_000 + "})"
    found = extract_observations([ParsedEntry("m1", "assistant", T, line)])
    assert all(f["sourceEntryIds"] == ["m1"] for f in found)
