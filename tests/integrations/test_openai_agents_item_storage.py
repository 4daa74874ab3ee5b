"""How ``PrismSession`` stores an SDK item (schema version 7): one entry per item, a
message item's text once, every shape back exactly, on every adapter.

The items are shaped like what the Agents SDK hands a session in a coding session:
dated user messages with names, image and file parts, output text with annotations and
logprobs, refusals, tool calls with JSON arguments, tool outputs that are listings or
parts, reasoning with encrypted content, hosted tool calls, system and developer text.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from prism_om.entries import SessionEntry
from prism_om.integrations.openai_agents import ITEM_TYPE, ROOT_TYPE, PrismSession, items
from prism_om.integrations.openai_agents.items import entry_for_item, item_of
from prism_om.testing.conformance import StoreOpener

from .test_openai_agents_memory import offline_memory

LISTING = (
    "total 24\n"
    "drwxr-xr-x 2 priya staff 4096 Mar  2 09:14 .\n"
    "-rw-r--r-- 1 priya staff 1832 Mar  2 09:13 billing_export.py\n"
    "-rw-r--r-- 1 priya staff  977 Mar  1 17:40 test_billing_export.py\n"
)
CODE = (
    'def export(day: date) -> Path:\n    """Write the VAT CSV."""\n    return OUT / f"{day}.csv"\n'
)

SHAPES: list[dict[str, Any]] = [
    {"role": "user", "content": "On Monday 2 March 2026 Priya moved the export to 02:00 UTC."},
    {"role": "user", "content": ""},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Why does this fail? See the screenshot."},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,iVBORw0KGgo=",
                "detail": "low",
            },
            {"type": "input_file", "file_id": "file-9Xy", "filename": "export.log"},
            {"type": "input_text", "text": CODE},
        ],
    },
    {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {
                "type": "output_text",
                "text": "The job reads `OUT` before it is set; see line 3.",
                "annotations": [
                    {
                        "type": "url_citation",
                        "url": "https://docs.python.org",
                        "start_index": 0,
                        "end_index": 7,
                        "title": "py",
                    }
                ],
                "logprobs": [],
            },
            {"type": "output_text", "text": "Try:\n```python\n" + CODE + "```", "annotations": []},
        ],
    },
    {
        "id": "msg_02",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I cannot print the API key."}],
    },
    {
        "id": "fc_01",
        "type": "function_call",
        "call_id": "call_ls",
        "name": "shell",
        "arguments": json.dumps({"cmd": ["ls", "-la", "/srv/billing"], "timeout": 10}),
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_ls", "output": LISTING},
    {
        "type": "function_call_output",
        "call_id": "call_ls",
        "output": [
            {"type": "input_text", "text": "exit status 0"},
            {"type": "input_image", "image_url": "https://example.com/plot.png"},
        ],
    },
    {
        "id": "rs_01",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Check the cron entry first."}],
        "encrypted_content": "gAAAAABo...",
    },
    {"role": "system", "content": "You are a careful release engineer."},
    {"role": "developer", "content": "Answer in British English."},
    {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "cron utc"},
    },
    {"type": "item_reference", "id": "msg_00"},
    {"role": "assistant", "content": "Plain assistant text, as a host may hand it."},
    {"role": "user", "content": "Ünïcödé, emoji 🚀 and a NUL-free tab\tkept."},
]
# Item shapes whose message holds their text: stored without it in the item's data.
TEXT_IN_MESSAGE = [0, 2, 3, 6, 7, 13, 14]


def _entries(shapes: list[dict[str, Any]]) -> list[SessionEntry]:
    return [entry_for_item("s", item, index=n) for n, item in enumerate(shapes)]


def test_each_item_is_one_entry_that_gives_it_back_exactly() -> None:
    for item, entry in zip(SHAPES, _entries(SHAPES), strict=True):
        assert entry.custom_type == ITEM_TYPE
        assert item_of(entry) == item
        # A fresh copy each time: changing it changes nothing stored.
        got = item_of(entry)
        assert got is not None
        got["changed"] = True
        assert item_of(entry) == item


def test_a_message_items_text_is_stored_once() -> None:
    for n, entry in enumerate(_entries(SHAPES)):
        assert entry.data is not None
        stored = json.dumps(entry.data)
        assert (entry.data.get("textInMessage") is True) == (n in TEXT_IN_MESSAGE), n
        if n in TEXT_IN_MESSAGE:
            assert entry.message is not None
            text = entry.message.text()
            assert text and all(line not in stored for line in text.splitlines() if len(line) > 8)


def test_an_item_its_message_would_not_give_back_keeps_all_its_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Should a message ever hold the text otherwise than word for word, the item keeps
    # its own: the split is checked when the entry is built.
    real = items.item_message

    def altered(item: Any) -> Any:
        fields = real(item)
        if fields is not None and isinstance(fields["content"], str):
            fields["content"] = fields["content"].strip() + " (edited)"
        return fields

    monkeypatch.setattr(items, "item_message", altered)
    entry = entry_for_item("s", SHAPES[0], index=0)
    assert entry.data == {"type": ITEM_TYPE, "item": SHAPES[0]}
    assert item_of(entry) == SHAPES[0]


async def test_every_shape_round_trips_on_every_adapter(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        session = PrismSession("shapes", store)
        await session.add_items(copy.deepcopy(SHAPES))
        await session.add_items(copy.deepcopy(SHAPES[:3]))
        assert await session.get_items() == [*SHAPES, *SHAPES[:3]]
        assert await session.get_items(4) == [*SHAPES, *SHAPES[:3]][-4:]
        branch = await store.entries("shapes")
        assert branch[0].custom_type == ROOT_TYPE
        assert len(branch) == 1 + len(SHAPES) + 3
        # Read back from the store after a reopen, where the adapter keeps anything.
        assert await session.pop_item() == SHAPES[2]
        assert await session.get_items() == [*SHAPES, *SHAPES[:2]]
    finally:
        await store.close()
    if not store_opener.persistent:
        return
    reopened = await store_opener.open()
    try:
        assert await PrismSession("shapes", reopened).get_items() == [*SHAPES, *SHAPES[:2]]
    finally:
        await reopened.close()


async def test_every_shape_round_trips_with_memory(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        session = PrismSession("mem", store, memory=offline_memory(message_tokens=10**6))
        await session.add_items(copy.deepcopy(SHAPES))
        # Nothing observed yet: memory is empty and every item is in the window.
        assert await session.get_items() == SHAPES
        assert await session.get_items(len(SHAPES)) == SHAPES
    finally:
        await store.close()
