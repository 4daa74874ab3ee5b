"""A page's items are built without per-message redaction work when there is no secret.

Counted, not timed: the redactor is resolved once per page (it was resolved again for
every message, twice), and the redacting text path runs only when there are secrets.
The items are the same either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from prism_om.entries import SessionEntry, entry_text
from prism_om.observational_memory import page as page_module
from prism_om.observational_memory.page import build_branch_page, page_message
from prism_om.testing.generate import make_message


def messages() -> list[SessionEntry]:
    entries = [make_message("s", f"m{n}", None, "user", f"text {n} " * 40, n) for n in range(20)]
    entries.append(
        SessionEntry.model_validate(
            {
                "id": "call",
                "sessionId": "s",
                "parentId": None,
                "kind": "message",
                "timestamp": "2025-01-01T00:00:00Z",
                "message": {
                    "role": "assistant",
                    "content": "calling",
                    "toolCalls": [{"id": "c1", "name": "f", "arguments": {"q": "hunter2"}}],
                },
            }
        )
    )
    return entries


def counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    calls = [0]
    original: Callable[..., Any] = getattr(page_module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(page_module, name, counted)
    return calls


@pytest.mark.parametrize("detail", ["summary", "full"])
def test_no_secrets_no_redaction_work(monkeypatch: pytest.MonkeyPatch, detail: Any) -> None:
    chosen = messages()
    expected = [page_message(e, detail, None) for e in chosen]
    resolved = counting(monkeypatch, "redactor")
    redacting = counting(monkeypatch, "redacted_entry_text")
    page = build_branch_page(
        chosen, False, cursor="x", limit=len(chosen), direction="forward", detail=detail
    )
    assert resolved == [1]  # was 1 + 2 per message
    assert redacting == [0]  # was 1 per message in summary detail
    assert list(page.messages) == expected
    if detail == "summary":
        assert [m["text"] for m in page.messages] == [entry_text(e)[:200] for e in chosen]


def test_secrets_are_still_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = messages()
    redacting = counting(monkeypatch, "redacted_entry_text")
    page = build_branch_page(
        chosen,
        False,
        cursor="x",
        limit=len(chosen),
        direction="forward",
        detail="summary",
        secrets=["hunter2", "text 3"],
    )
    assert redacting == [len(chosen)]
    shown = " ".join(m["text"] for m in page.messages)
    assert "hunter2" not in shown and "text 3 " not in shown and "[REDACTED]" in shown
