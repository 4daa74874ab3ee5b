"""Secrets are redacted however many JSON escapings they went through, up to the bound."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from prism_om.core.redaction import (
    MAX_ESCAPE_LEVELS,
    REDACTION_MARKER,
    Redactor,
    redacted_entry_text,
)
from prism_om.entries import ToolCall, custom_entry, message_entry

# Every secret holds one of these; the scaffolding around it never does, so any of them left
# in the output (raw or as a \u escape) is a piece of the secret that got through.
TELLTALE = "xz7é€"
TELLTALE_ESCAPES = ("u00e9", "u20ac")

secrets = st.builds(
    lambda head, tell, tail: head + tell + tail,
    st.text(alphabet="\"\\'é€-\n\t/", max_size=4),
    st.text(alphabet=TELLTALE, min_size=1, max_size=3),
    st.text(alphabet="\"\\'xz7é€-\n", max_size=4),
)


def assert_no_piece(text: str) -> None:
    assert REDACTION_MARKER in text
    assert not any(c in text for c in TELLTALE), text
    assert not any(e in text for e in TELLTALE_ESCAPES), text


def nest(secret: str, depth: int, ascii_levels: list[bool]) -> str:
    """``secret`` inside a JSON object serialised into a string ``depth`` times over."""
    value: object = {"auth": secret}
    for level in range(depth):
        value = {"body": json.dumps(value, ensure_ascii=ascii_levels[level])}
    return json.dumps(value, ensure_ascii=ascii_levels[depth])


@settings(max_examples=150, deadline=None)
@given(
    secret=secrets,
    depth=st.integers(0, MAX_ESCAPE_LEVELS - 1),
    ascii_levels=st.lists(st.booleans(), min_size=MAX_ESCAPE_LEVELS, max_size=MAX_ESCAPE_LEVELS),
)
def test_text_nested_to_any_depth_is_redacted(
    secret: str, depth: int, ascii_levels: list[bool]
) -> None:
    # ``depth`` nested JSON strings plus the outer serialisation: depth + 1 escapings.
    assert_no_piece(Redactor([secret]).text(nest(secret, depth, ascii_levels)))


@settings(max_examples=100, deadline=None)
@given(
    secret=secrets,
    depth=st.integers(0, MAX_ESCAPE_LEVELS),
    ascii_levels=st.lists(
        st.booleans(), min_size=MAX_ESCAPE_LEVELS + 1, max_size=MAX_ESCAPE_LEVELS + 1
    ),
)
def test_repeated_dumps_of_the_bare_secret_is_redacted(
    secret: str, depth: int, ascii_levels: list[bool]
) -> None:
    text = secret
    for level in range(depth):
        text = json.dumps(text, ensure_ascii=ascii_levels[level])
    assert_no_piece(Redactor([secret]).text(f"before {text} after"))


def test_reviewer_three_levels_and_repr_are_redacted() -> None:
    secret = "pa\"ss\\wo'rd-XYZ"
    red = Redactor([secret])
    assert (
        red.text(json.dumps(json.dumps(json.dumps(secret))))
        == f'"\\"\\\\\\"{REDACTION_MARKER}\\\\\\"\\""'
    )
    assert "rd-XYZ" not in red.text(repr(secret)) and "rd-XYZ" not in red.text(
        json.dumps(repr(secret))
    )


@settings(max_examples=100, deadline=None)
@given(
    secret=secrets,
    depth=st.integers(0, MAX_ESCAPE_LEVELS),
    ascii_levels=st.lists(
        st.booleans(), min_size=MAX_ESCAPE_LEVELS + 1, max_size=MAX_ESCAPE_LEVELS + 1
    ),
)
def test_entry_arguments_are_redacted_before_serialising(
    secret: str, depth: int, ascii_levels: list[bool]
) -> None:
    # Up to the full bound inside the arguments: serialising first would add one more
    # escaping, beyond what the redactor matches.
    payload = secret
    for level in range(depth):
        payload = json.dumps({"body": payload}, ensure_ascii=ascii_levels[level])
    call = ToolCall(id="c", name="http", arguments={"payload": payload, "list": [payload]})
    entry = message_entry("s", "assistant", "calling", tool_calls=[call])
    assert_no_piece(redacted_entry_text(entry, [secret]))
    data = custom_entry("s", {"type": "host.audit", "payload": payload})
    assert_no_piece(redacted_entry_text(data, [secret]))


def test_redacted_entry_text_matches_entry_text_without_secrets() -> None:
    call = ToolCall(id="c", name="http", arguments={"b": 1, "a": ["x"]})
    entry = message_entry("s", "assistant", "hi", tool_calls=[call])
    from prism_om.entries import entry_text

    assert redacted_entry_text(entry, None) == entry_text(entry) == 'hi\nhttp({"a":["x"],"b":1})'
    assert redacted_entry_text(entry, ["zzz"]) == entry_text(entry)
