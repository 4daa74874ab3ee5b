"""Rendering memory, the recent-message window, context blocks and secret redaction."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism_om import (
    MEMORY_BLOCK_NAME,
    RECENT_MESSAGES_BLOCK_NAME,
    Observation,
    Reflection,
    render_observational_memory,
)
from prism_om.core.limits import (
    RECENT_WINDOW_MAX_BYTES,
    RENDERED_MEMORY_MAX_BYTES,
)
from prism_om.core.recent_window import recent_message_window
from prism_om.core.redaction import REDACTION_MARKER, Redactor, redact_text, redact_value
from prism_om.core.render import render_observational_memory_details
from prism_om.entries import SessionEntry, message_entry
from prism_om.errors import InvalidInputError, LimitExceededError
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    build_observational_memory_projection,
    create_folded_memory_details,
    create_observational_memory_compaction_strategy,
    fold_observational_memory_ledger,
    render_recent_message_window,
    select_recent_message_entries,
)
from prism_om.testing.om_factories import BranchBuilder, branch_builders, random_builder
from prism_om.tokens import get_estimator

HEURISTIC = get_estimator("chars/4")


def o(
    oid: str,
    text: str = "fact",
    *,
    at: str = "2024-05-01T10:00:00Z",
    priority: str = "medium",
    sources: tuple[str, ...] = ("m0",),
    **extra: Any,
) -> Observation:
    return Observation.model_validate(
        {
            "id": oid,
            "text": text,
            "sourceEntryIds": list(sources),
            "observedAt": at,
            "priority": priority,
            **extra,
        }
    )


def r(rid: str, text: str = "summary", *, priority: str = "medium") -> Reflection:
    return Reflection.model_validate(
        {"id": rid, "text": text, "observationIds": ["a" * 12], "priority": priority}
    )


def size(text: str) -> int:
    return len(text.encode("utf-8"))


# -- render -------------------------------------------------------------------------------


def test_render_layout_reflections_first_then_observations_by_date() -> None:
    text = render_observational_memory(
        [r("f" * 12, "The user migrates billing.", priority="high")],
        [
            o("b" * 12, "Later same day", at="2024-05-01T16:30:00Z"),
            o(
                "a" * 12,
                "Chose pgbouncer",
                at="2024-05-01T09:05:00Z",
                priority="high",
                referencedDate="2024-05-07",
            ),
            o("c" * 12, "Next day\nsecond line", at="2024-05-02T08:00:00+02:00", priority="low"),
        ],
    )
    assert text == (
        "# Observational memory\n"
        "Ids in brackets can be recalled for their exact source messages.\n"
        "\n"
        "## Reflections\n"
        "- [ffffffffffff] The user migrates billing.\n"
        "\n"
        "## Observations\n"
        "### 2024-05-01\n"
        "- [aaaaaaaaaaaa] Chose pgbouncer (refers to 2024-05-07)\n"
        "- [bbbbbbbbbbbb] Later same day\n"
        "### 2024-05-02\n"
        "- [cccccccccccc] Next day\n"
        "  second line"
    )


def test_render_of_nothing_is_empty_and_outline_comes_first() -> None:
    assert render_observational_memory([], []) == ""
    assert render_observational_memory([], [], outline="  ") == ""
    text = render_observational_memory([], [o("a" * 12)], outline="- task:cleanup")
    assert text.index("## Scope outline\n- task:cleanup") < text.index("## Observations")


def test_render_cap_omits_lowest_priority_then_oldest_with_a_marker() -> None:
    observations = [
        o("a" * 12, "x" * 200, at="2024-05-01T10:00:00Z", priority="high"),
        o("b" * 12, "x" * 200, at="2024-05-01T09:00:00Z", priority="low"),
        o("c" * 12, "x" * 200, at="2024-05-01T08:00:00Z", priority="medium"),
        o("d" * 12, "x" * 200, at="2024-05-01T11:00:00Z", priority="low"),
    ]
    full = render_observational_memory([], observations)
    details = render_observational_memory_details([], observations, max_bytes=size(full) - 1)
    assert details.omitted_observation_ids == ("b" * 12,)  # lowest priority, oldest
    assert size(details.text) <= size(full) - 1
    assert details.text.endswith("[1 observation omitted to fit the memory cap]")
    details = render_observational_memory_details([], observations, max_bytes=size(full) - 500)
    assert details.omitted_observation_ids == ("b" * 12, "d" * 12, "c" * 12)
    assert details.observation_ids == ("a" * 12,)
    assert "[3 observations omitted" in details.text


def test_render_omits_reflections_only_after_every_observation() -> None:
    reflections = [r("e" * 12, "y" * 300, priority="high"), r("f" * 12, "y" * 300, priority="low")]
    details = render_observational_memory_details(
        reflections, [o("a" * 12, "x" * 50)], max_bytes=500
    )
    assert details.omitted_observation_ids == ("a" * 12,)
    assert details.omitted_reflection_ids == ("f" * 12,)
    assert "[1 observation and 1 reflection omitted" in details.text
    assert size(details.text) <= 500


def test_render_never_exceeds_its_cap_even_when_the_outline_alone_is_too_big() -> None:
    details = render_observational_memory_details(
        [], [o("a" * 12)], outline="é" * 400, max_bytes=300
    )
    assert details.truncated and size(details.text) <= 300


def test_render_cap_at_256_kib() -> None:
    observations = [
        o(
            f"{i:012x}",
            f"observation {i} " + "word " * 200,
            at=f"2024-05-{1 + i % 28:02d}T10:00:00Z",
        )
        for i in range(400)
    ]
    details = render_observational_memory_details([r("f" * 12)], observations)
    assert size(details.text) <= RENDERED_MEMORY_MAX_BYTES
    assert details.omitted_observation_ids and details.reflection_ids == ("f" * 12,)
    assert f"[{len(details.omitted_observation_ids)} observations omitted" in details.text
    with pytest.raises(LimitExceededError):
        render_observational_memory([], [], max_bytes=RENDERED_MEMORY_MAX_BYTES + 1)
    with pytest.raises(InvalidInputError):
        render_observational_memory([], [], max_bytes=0)


# -- redaction ----------------------------------------------------------------------------


def test_redaction_is_exact_longest_first_and_single_pass() -> None:
    assert (
        redact_text("key sk-abc and sk-abcdef", ["sk-abc", "sk-abcdef"])
        == f"key {REDACTION_MARKER} and {REDACTION_MARKER}"
    )
    assert redact_text("a.b a+b", ["a.b"]) == f"{REDACTION_MARKER} a+b"  # literal, not a regex
    assert redact_text("nothing", []) == "nothing"
    assert redact_text("x", ["", "y"]) == "x"
    value = {"k-s3cret": ["s3cret", ("s3cret", 1)], "n": None, "f": 1.5}
    assert redact_value(value, ["s3cret"]) == {
        f"k-{REDACTION_MARKER}": [REDACTION_MARKER, (REDACTION_MARKER, 1)],
        "n": None,
        "f": 1.5,
    }
    assert value["k-s3cret"] == ["s3cret", ("s3cret", 1)]  # a copy, not in place
    with pytest.raises(InvalidInputError, match="not one string"):
        Redactor("secret")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        Redactor([1])  # type: ignore[list-item]


def test_a_secret_appears_in_no_rendered_output() -> None:
    secret, longer = "hunter2-TOKEN", "hunter2-TOKEN-extended"
    b = BranchBuilder()
    m0 = b.message("user", f"my key is {secret} and the other is {longer}")
    b.message("assistant", "noted")
    b.observe(1, sources=[m0.id], text=f"User's key is {secret}", priority="low")
    b.observe(1, sources=[m0.id], text=f"Longer key {longer}")
    b.reflect(1)
    # Reflections take the builder's random text; add one that carries the secret.
    b.custom(
        {
            "type": "om.reflections.recorded",
            "reflections": [
                {
                    "id": "9" * 12,
                    "text": f"keys: {secret}",
                    "observationIds": [b.model.observations[0].id],
                    "trust": secret,
                    "metadata": {secret: secret},
                }
            ],
        }
    )
    for _ in range(3):
        b.message("user", f"again {secret}")
    entries = b.path
    secrets = [secret, longer]

    outputs: list[str] = []
    for keep in (0, 2, 8):
        blocks = build_observational_memory_context_blocks(
            entries, keep_recent_entries=keep, secrets=secrets
        )
        assert blocks
        outputs += [blk.text for blk in blocks]
    projection = build_observational_memory_projection(entries)
    outputs.append(
        render_observational_memory(
            projection.active_reflections,
            projection.active_observations,
            secrets=secrets,
            outline=secret,
        )
    )
    outputs.append(render_recent_message_window(entries, secrets=secrets))
    outputs.append(
        json.dumps(create_folded_memory_details(entries, secrets=secrets), ensure_ascii=False)
    )
    for pool in (20_000, 1):
        strategy = create_observational_memory_compaction_strategy(
            secrets=secrets, observations_pool_max_tokens=pool
        )
        compaction = strategy.compact(entries, session_id="s1")
        outputs += [compaction.summary, json.dumps(compaction.data, ensure_ascii=False)]
    # The secret was there to redact, and it is nowhere now (nor is any part of the longer one).
    assert any(REDACTION_MARKER in text for text in outputs)
    for text in outputs:
        assert secret not in text and "extended" not in text


# -- the recent-message window ------------------------------------------------------------


def chat(
    n: int, text: str = "message {i}", *, roles: tuple[str, ...] = ("user", "assistant")
) -> list[SessionEntry]:
    """``n`` messages with a custom note after every third one."""
    b = BranchBuilder()
    for i in range(n):
        b.message(roles[i % len(roles)], text.format(i=i))
        if i % 3 == 2:
            b.custom({"type": "app.note"})
    return b.path


def test_select_recent_messages_by_count_then_tokens() -> None:
    entries = chat(12)
    eligible = [e for e in entries if e.kind == "message"]
    assert select_recent_message_entries(entries) == eligible[-8:]
    assert select_recent_message_entries(entries, 3) == eligible[-3:]
    assert select_recent_message_entries(entries, 100) == eligible
    assert select_recent_message_entries(entries, 0) == []
    assert select_recent_message_entries([], 8) == []
    per = HEURISTIC.count_entry(eligible[-1])
    assert (
        select_recent_message_entries(entries, 8, max_tokens=per * 3, estimator=HEURISTIC)
        == eligible[-3:]
    )
    # The newest message is kept even when it alone exceeds the token budget.
    assert (
        select_recent_message_entries(entries, 8, max_tokens=1, estimator=HEURISTIC)
        == eligible[-1:]
    )
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(InvalidInputError):
            select_recent_message_entries(entries, bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        select_recent_message_entries(entries, 8, max_tokens=0)


def test_recent_window_text_and_byte_cap() -> None:
    entries = chat(6)
    window = recent_message_window(entries, 3)
    assert window.entry_ids == tuple(e.id for e in select_recent_message_entries(entries, 3))
    first = window.entries[0]
    assert window.text.startswith(f"[{first.role} {first.id} {first.timestamp}]\nmessage 3\n\n")
    assert render_recent_message_window(entries, 3) == window.text

    small = recent_message_window(entries, 3, max_bytes=size(window.text) - 1)
    assert small.omitted_entry_ids == (first.id,)
    assert small.text.startswith("[1 earlier message omitted to fit the window cap]\n\n")
    assert size(small.text) <= size(window.text) - 1
    with pytest.raises(LimitExceededError):
        recent_message_window(entries, max_bytes=RECENT_WINDOW_MAX_BYTES + 1)


def test_recent_window_cuts_a_single_message_larger_than_the_cap() -> None:
    entries = chat(3, "é" * 400_000, roles=("user",))  # 800 KB each
    messages = [e for e in entries if e.kind == "message"]
    window = recent_message_window(entries, 3)
    assert size(window.text) <= RECENT_WINDOW_MAX_BYTES
    assert window.truncated_entry_id == messages[-1].id
    assert window.entries == (messages[-1],) and window.complete_entry_ids == ()
    assert window.omitted_entry_ids == tuple(e.id for e in messages[:-1])
    assert window.text.startswith("[2 earlier messages omitted")
    assert window.text.endswith("[message truncated to fit the recent-message window cap]")
    assert size(recent_message_window(entries, 3, max_bytes=10).text) <= 10


def test_recent_window_fills_512_kib_dropping_oldest() -> None:
    entries = chat(8, "{i} " + "w" * 100_000, roles=("user",))
    window = recent_message_window(entries, 8)
    assert size(window.text) <= RECENT_WINDOW_MAX_BYTES
    assert len(window.entries) == 5 and len(window.omitted_entry_ids) == 3
    assert window.entries[-1] == [e for e in entries if e.kind == "message"][-1]


def test_tool_results_name_their_call() -> None:
    entry = message_entry(
        "s1", "tool", "42", entry_id="t1", timestamp="2024-05-01T10:00:00Z", tool_call_id="call_9"
    )
    assert render_recent_message_window([entry]).startswith(
        "[tool t1 2024-05-01T10:00:00Z result of call_9]\n42"
    )


# -- context blocks -----------------------------------------------------------------------


def test_context_blocks_align_memory_to_the_recent_window() -> None:
    b = BranchBuilder()
    old = b.message("user", "old")
    b.message("assistant", "reply")
    recent = [b.message("user", f"recent {i}") for i in range(3)]
    b.observe(1, sources=[old.id], text="about old")
    b.observe(1, sources=[recent[0].id], text="about recent only")
    b.observe(1, sources=[old.id, recent[1].id], text="spans the boundary")
    blocks = build_observational_memory_context_blocks(
        b.path, keep_recent_entries=3, estimator=HEURISTIC
    )
    assert [blk.name for blk in blocks] == [MEMORY_BLOCK_NAME, RECENT_MESSAGES_BLOCK_NAME]
    memory, window = blocks
    assert "about old" in memory.text and "spans the boundary" in memory.text
    assert "about recent only" not in memory.text
    assert memory.entry_ids == (old.id, recent[1].id)
    assert memory.memory_ids == (b.model.observations[0].id, b.model.observations[2].id)
    assert window.entry_ids == tuple(e.id for e in recent)
    assert memory.tokens == HEURISTIC.count(memory.text) and window.tokens == HEURISTIC.count(
        window.text
    )
    # With a wider window nothing is hidden; with none, everything is shown.
    assert (
        "about recent only"
        in build_observational_memory_context_blocks(b.path, keep_recent_entries=0)[0].text
    )
    assert [
        blk.name for blk in build_observational_memory_context_blocks(b.path, keep_recent_entries=0)
    ] == [MEMORY_BLOCK_NAME]


def test_context_blocks_passive_empty_and_memoryless_branches() -> None:
    entries = random_builder(5, 60).path
    assert build_observational_memory_context_blocks(entries, passive=True) == []
    assert build_observational_memory_context_blocks([]) == []
    plain = chat(4)
    blocks = build_observational_memory_context_blocks(plain)
    assert [blk.name for blk in blocks] == [RECENT_MESSAGES_BLOCK_NAME]


def test_context_blocks_withhold_invalidated_memory() -> None:
    b = BranchBuilder()
    m0 = b.message("user", "revoked source")
    m1 = b.message("user", "kept source")
    b.observe(1, sources=[m0.id], text="from revoked")
    b.observe(1, sources=[m1.id], text="from kept")
    blocks = build_observational_memory_context_blocks(
        b.path, keep_recent_entries=0, invalidated_ids=[m0.id]
    )
    assert "from kept" in blocks[0].text and "from revoked" not in blocks[0].text


def test_recent_message_token_budget_reaches_the_block() -> None:
    # Memory covers every message: the token trim leaves only the newest one.
    b = BranchBuilder()
    for n in range(10):
        b.message("user", f"message {n} " * 5)
    b.observe(1, sources=[b.path[0].id], text="the first message")
    blocks = build_observational_memory_context_blocks(
        b.path, recent_message_max_tokens=1, estimator=HEURISTIC
    )
    assert blocks[-1].entry_ids == (b.path[9].id,)


def test_recent_message_token_budget_never_trims_what_memory_lacks() -> None:
    # Nothing is observed yet: every message is in view, whatever the token trim says,
    # since a trimmed one would be in neither the memory nor the request.
    entries = chat(10)
    blocks = build_observational_memory_context_blocks(
        entries, keep_recent_entries=2, recent_message_max_tokens=1, estimator=HEURISTIC
    )
    assert blocks[-1].entry_ids == tuple(e.id for e in entries if e.kind == "message")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(branch_builders(max_steps=50), st.integers(0, 6))
def test_context_blocks_show_only_visible_active_memory(builder: BranchBuilder, keep: int) -> None:
    path = builder.path
    blocks = {
        blk.name: blk
        for blk in build_observational_memory_context_blocks(path, keep_recent_entries=keep)
    }
    recent_ids = (
        set(blocks[RECENT_MESSAGES_BLOCK_NAME].entry_ids)
        if RECENT_MESSAGES_BLOCK_NAME in blocks
        else set()
    )
    # The window: every message memory has not covered, and at least the last ``keep``.
    cover = fold_observational_memory_ledger(path).observation_covers_up_to_id
    after = path if cover is None else path[[e.id for e in path].index(cover) + 1 :]
    uncovered = {e.id for e in after if e.kind == "message"}
    assert recent_ids == {e.id for e in select_recent_message_entries(path, keep)} | uncovered
    projection = build_observational_memory_projection(path)
    active = {o.id: o for o in projection.active_observations}
    shown = blocks[MEMORY_BLOCK_NAME].memory_ids if MEMORY_BLOCK_NAME in blocks else ()
    expected_obs = [
        o.id for o in projection.active_observations if not set(o.source_entry_ids) <= recent_ids
    ]
    assert set(shown) == {r.id for r in projection.active_reflections} | set(expected_obs)
    for memory_id in shown:
        assert memory_id in active or memory_id in {r.id for r in projection.active_reflections}
    for blk in blocks.values():
        assert blk.text and blk.tokens > 0


def test_public_names_resolve() -> None:
    import prism_om.observational_memory as om

    assert len(set(om.__all__)) == len(om.__all__)
    for name in om.__all__:
        assert getattr(om, name) is not None
