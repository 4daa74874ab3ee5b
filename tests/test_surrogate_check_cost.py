"""The lone-surrogate rule on append costs one text test for a plain message.

``check_batch_shape`` runs it on every appended entry; one test over a plain message's
joined text (``isascii``, else one regex scan) answers for all of its fields. A message
that holds a surrogate, or any other entry, still gets the field-by-field search that
names the field.
"""

from __future__ import annotations

import pytest

from prism_om import entries as entries_module
from prism_om.entries import find_lone_surrogate, message_entry
from prism_om.errors import InvalidEntryError
from prism_om.stores.base import check_batch_shape

TS = "2026-01-01T00:00:00.000Z"


def counted_field_checks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []
    real = entries_module._bad

    def counting(text: str | None) -> bool:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(entries_module, "_bad", counting)
    return calls


def test_an_ascii_message_needs_no_field_by_field_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = [message_entry("s", "user", "hello there", entry_id="a", timestamp=TS)]
    parent = "a"
    for n in range(99):
        batch.append(
            message_entry(
                "s", "assistant", f"reply {n}", parent_id=parent, entry_id=f"m{n}", timestamp=TS
            )
        )
        parent = f"m{n}"
    calls = counted_field_checks(monkeypatch)
    assert check_batch_shape(batch) == batch
    # Eight field tests per message before (id, session, parent, timestamp, summary,
    # content, tool call id, name): 800 for this batch.
    assert calls == []


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"id": "a\ud800"}, "id"),
        ({"timestamp": "2026\udc00"}, "timestamp"),
    ],
)
def test_a_surrogate_outside_the_content_is_still_named(update: dict[str, str], field: str) -> None:
    entry = message_entry("s", "user", "caf\u00e9", entry_id="a", timestamp=TS)
    assert find_lone_surrogate(entry) is None
    assert find_lone_surrogate(entry.model_copy(update=update)) == field


def test_a_non_ascii_message_needs_one_scan_and_a_bad_one_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Real text (accents, dashes, curly quotes): one regex scan of the joined text.
    entry = message_entry(
        "s", "user", "na\u00efve \u2014 \u201ctext\u201d", entry_id="a", timestamp=TS
    )
    bad = entry.model_copy(
        update={"message": entry.message.model_copy(update={"content": "x\udfff"})}  # type: ignore[union-attr]
    )
    calls = counted_field_checks(monkeypatch)
    assert find_lone_surrogate(entry) is None
    assert calls == []
    # A surrogate is still searched field by field, and its field named.
    with pytest.raises(InvalidEntryError, match=r"message\.content"):
        check_batch_shape([bad])
    assert len(calls) > 1
