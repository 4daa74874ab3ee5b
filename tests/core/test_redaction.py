"""Secrets in every representation (issue 13 items 9 and 10): raw, escaped, overlapping."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism_om.core.redaction import REDACTION_MARKER, Redactor
from prism_om.entries import message_entry
from prism_om.observational_memory import render_recent_message_window
from prism_om.providers import ProviderRequest, ScriptedProvider
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.workers import (
    RECORD_OBSERVATIONS,
    create_observational_memory_runtime,
    parse_transcript,
)
from prism_om.workers.transcript import serialize_entry

# A secret a JSON or repr escape changes: a quote, a backslash and a non-ASCII letter.
SECRET = 'pa"ss\\w0rd-é-9f3k'


def forms(secret: str) -> list[str]:
    """Every way the secret may appear in output: raw and escaped once or twice."""
    once = [
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
    ]
    return [*once, *(json.dumps(f)[1:-1] for f in once)]


def assert_clean(text: str, secret: str = SECRET) -> None:
    for form in forms(secret):
        assert form not in text, f"secret leaked as {form!r} in {text[:300]!r}"


def tool_call_entry(session_id: str = "s1", parent_id: str | None = None) -> Any:
    return message_entry(
        session_id,
        "assistant",
        "Logging in to the billing service now.",
        parent_id=parent_id,
        tool_calls=[
            {"id": "call_1", "name": "login", "arguments": {"user": "ann", "password": SECRET}}
        ],
    )


# -- 13.10: overlapping secrets ---------------------------------------------------------


def test_overlapping_secrets_leave_no_piece_of_either() -> None:
    red = Redactor(["user-sk", "sk-live-ABCDEFGH1234"])
    out = red.text("key user-sk-live-ABCDEFGH1234 end")
    assert out == f"key {REDACTION_MARKER} end"
    assert "live" not in out and "ABCDEFGH" not in out and "user" not in out


def test_overlaps_in_either_order_and_chains_of_three() -> None:
    red = Redactor(["sk-live-ABCDEFGH1234", "1234-tail", "user-sk"])
    assert red.text("user-sk-live-ABCDEFGH1234-tail!") == f"{REDACTION_MARKER}!"
    # Separate occurrences stay separate; the text between them survives.
    assert red.text("user-sk and sk-live-ABCDEFGH1234") == (
        f"{REDACTION_MARKER} and {REDACTION_MARKER}"
    )


def test_a_secret_inside_another_is_replaced_whole() -> None:
    red = Redactor(["abc", "xabcx"])
    assert red.text("1xabcx2abc3") == f"1{REDACTION_MARKER}2{REDACTION_MARKER}3"


# -- 13.9: escaped representations ------------------------------------------------------


@pytest.mark.parametrize("form", forms(SECRET))
def test_every_escaped_form_is_redacted(form: str) -> None:
    assert Redactor([SECRET]).text(f"before {form} after") == f"before {REDACTION_MARKER} after"


def test_structured_arguments_redact_before_and_after_serialising() -> None:
    red = Redactor([SECRET])
    value = {"args": {"password": SECRET, SECRET: [SECRET]}}
    assert_clean(json.dumps(red.value(value)))
    assert_clean(red.text(json.dumps(value)))
    assert_clean(red.text(json.dumps(value, ensure_ascii=False)))
    assert_clean(red.text(json.dumps(json.dumps(value))))


def test_recent_messages_block_redacts_a_secret_in_tool_call_arguments() -> None:
    text = render_recent_message_window([tool_call_entry()], secrets=[SECRET])
    assert REDACTION_MARKER in text
    assert "login(" in text
    assert_clean(text)


def test_worker_transcript_redacts_a_secret_in_tool_call_arguments() -> None:
    block = serialize_entry(tool_call_entry(), Redactor([SECRET]))
    assert REDACTION_MARKER in block
    assert_clean(block)


def copying_observer(request: ProviderRequest) -> list[dict[str, Any]]:
    """A model that copies every line it is shown into an observation, verbatim."""
    if len(request.messages) > 1 or request.tools[0].name != RECORD_OBSERVATIONS:
        return []
    items = [
        {"text": f"Saw: {e.text}", "sourceEntryIds": [e.id]}
        for e in parse_transcript(request.messages[0].content)
    ]
    return [{"tool_call": {"name": RECORD_OBSERVATIONS, "arguments": {"observations": items}}}]


async def test_no_persisted_observation_holds_an_escaped_secret() -> None:
    store = MemoryStore()
    session = Session(store, "s1")
    await session.append_message("user", "Please log in to billing.")
    await session.append(tool_call_entry(parent_id=await session.leaf()))
    provider = ScriptedProvider([copying_observer] * 4, then="stop")
    sent: list[str] = []
    original = provider.generate

    def spy(request: ProviderRequest) -> Any:
        sent.append(request.system + "".join(m.content for m in request.messages))
        return original(request)

    provider.generate = spy  # type: ignore[method-assign]
    runtime = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": provider, "model": "m"},
        secrets=[SECRET],
    )
    result = await runtime.flush(force=True)
    assert result.observation_ids, result
    assert sent and all(REDACTION_MARKER in s or "login" not in s for s in sent)
    for prompt in sent:
        assert_clean(prompt)
    for entry in await store.list("s1"):
        if entry.custom_type is not None:
            assert_clean(entry.to_json())
            assert_clean(json.dumps(entry.to_wire(), ensure_ascii=False))


# -- the one-pass replacement equals the obvious definition -------------------------------


def reference_redact(text: str, secrets: list[str]) -> str:
    """Every occurrence of every secret (overlaps included), runs of overlapping
    occurrences merged, each run replaced by one marker."""
    spans = []
    for secret in {s for s in secrets if s}:
        start = text.find(secret)
        while start != -1:
            spans.append((start, start + len(secret)))
            start = text.find(secret, start + 1)
    spans.sort()
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, done = [], 0
    for start, end in merged:
        out += [text[done:start], REDACTION_MARKER]
        done = end
    return "".join([*out, text[done:]])


@given(
    text=st.text(alphabet="abc-", max_size=40),
    secrets=st.lists(st.text(alphabet="abc-", min_size=1, max_size=5), max_size=4),
)
@settings(max_examples=300, deadline=None)
def test_redaction_matches_the_reference_and_leaves_no_secret(
    text: str, secrets: list[str]
) -> None:
    out = Redactor(secrets).text(text)
    assert out == reference_redact(text, secrets)
    for secret in secrets:
        # Only a marker may still spell a secret (e.g. "-" or "a" inside "[REDACTED]").
        assert secret not in out.replace(REDACTION_MARKER, "\0")


def test_provider_errors_use_the_same_redaction() -> None:
    from prism_om.providers.base import ProviderError

    body = json.dumps({"error": f"key user-sk-live-ABCDEFGH1234 rejected; echo {SECRET}"})
    error = ProviderError(body, secrets=["user-sk", "sk-live-ABCDEFGH1234", SECRET, None])
    assert "live" not in str(error) and "ABCDEFGH" not in str(error)
    assert_clean(str(error))
    assert str(error).count("[redacted]") == 2
