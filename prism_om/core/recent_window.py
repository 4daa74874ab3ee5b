"""The recent-messages layer: the exact last few user/assistant/tool messages of a branch.

Selection: the last ``keep_recent_entries`` eligible message entries in branch order; with
``max_tokens``, the oldest are dropped until the rest fit, except that the newest message
is always kept (an agent that cannot see the latest message cannot answer it; the byte cap
below still bounds it). Compaction's ``keepEntryIds`` uses the same selection.

Rendering: each message as a header line (role, entry id, timestamp, and the tool call id
of a tool result) followed by its text, messages separated by a blank line. The window
never exceeds 512 KiB (or a smaller ``max_bytes``): the oldest messages are dropped first,
with a first line saying how many; a newest message that alone is too large is cut, with
a marker. Text is redacted of ``secrets`` before it is measured. A revoked message
(``invalidated_ids``) keeps its header line and shows ``[revoked]`` instead of its text,
so the window's shape stays aligned with compaction's ``keepEntryIds``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ..entries import SessionEntry
from ..errors import InvalidInputError
from ..tokens import TokenEstimator, get_estimator
from .limits import RECENT_WINDOW_MAX_BYTES, validate_limit
from .redaction import Redactor, redacted_entry_text, redactor
from .sources import is_eligible_observation_source_entry
from .text_caps import truncate_utf8, utf8_len
from .withheld import REVOKED_MARKER

__all__ = [
    "DEFAULT_KEEP_RECENT_ENTRIES",
    "MessageBlocks",
    "RecentMessageWindow",
    "check_keep_recent_entries",
    "recent_message_window",
    "render_message_window",
    "render_recent_message_window_from_entries",
    "select_recent_message_entries_from_entries",
]

DEFAULT_KEEP_RECENT_ENTRIES: Final = 8
_CUT_MARKER: Final = "\n[message truncated to fit the recent-message window cap]"
_SEPARATOR: Final = "\n\n"


@dataclass(frozen=True)
class RecentMessageWindow:
    """The rendered recent-message window and the entries it shows."""

    entries: tuple[SessionEntry, ...]
    """Messages shown, oldest first (the newest may be cut, see ``truncated_entry_id``)."""
    text: str
    omitted_entry_ids: tuple[str, ...] = ()
    """Selected messages dropped, oldest first, to fit the byte cap."""
    truncated_entry_id: str | None = None
    """The message shown only in part because it alone exceeds the cap."""

    @property
    def entry_ids(self) -> tuple[str, ...]:
        return tuple(e.id for e in self.entries)

    withheld_entry_ids: tuple[str, ...] = ()
    """Messages shown as ``[revoked]``, without their text."""
    tokens: int | None = None
    """The text's token count, when the window was rendered with ``MessageBlocks``."""

    @property
    def complete_entry_ids(self) -> tuple[str, ...]:
        """Messages shown whole: the ones memory need not repeat."""
        hidden = {self.truncated_entry_id, *self.withheld_entry_ids}
        return tuple(e.id for e in self.entries if e.id not in hidden)


def check_keep_recent_entries(value: object, name: str = "keep_recent_entries") -> int:
    """``value`` when it is a non-negative integer (0 keeps no recent messages)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def select_recent_message_entries_from_entries(
    entries: Sequence[SessionEntry],
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    *,
    max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
) -> list[SessionEntry]:
    """The last eligible message entries of the branch, oldest first. O(n)."""
    keep = check_keep_recent_entries(keep_recent_entries)
    if max_tokens is not None:
        validate_limit("max_tokens", max_tokens)
    chosen: list[SessionEntry] = []
    for entry in reversed(entries):
        if len(chosen) >= keep:
            break
        if is_eligible_observation_source_entry(entry):
            chosen.append(entry)
    if max_tokens is not None and len(chosen) > 1:
        est = estimator or get_estimator()
        total = 0
        for count, entry in enumerate(chosen):  # newest first
            total += est.count_entry(entry)
            if total > max_tokens and count > 0:
                chosen = chosen[:count]
                break
    chosen.reverse()
    return chosen


class MessageBlocks:
    """Each message's rendered block and its token counts, kept by entry id.

    A host that renders the window every turn (``observational_memory.branch_view``)
    passes one: an entry never changes, so its block (for one redactor) never does, and a
    turn renders and counts only the messages it has not shown before. The window's
    tokens are then the sum of its blocks' (each with the separator that follows it: a
    block starts where a count splits, so the sum is the whole text's count, exactly), for
    an estimator whose counts add up by line; any other counts the window's whole text.
    """

    def __init__(self, red: Redactor, estimator: TokenEstimator, max_entries: int = 4096):
        self.red = red
        self.estimator = estimator
        self._max = max_entries
        self._text: dict[tuple[str, bool], str] = {}
        self._tokens: dict[tuple[str, bool, bool], int] = {}

    def text(self, entry: SessionEntry, revoked: bool) -> str:
        key = (entry.id, revoked)
        found = self._text.get(key)
        if found is None:
            if len(self._text) >= self._max:
                self._text.clear()
                self._tokens.clear()
            found = self._text[key] = _render_message(entry, self.red, revoked)
        return found

    def tokens(self, entry: SessionEntry, revoked: bool, last: bool) -> int:
        key = (entry.id, revoked, last)
        found = self._tokens.get(key)
        if found is None:
            block = self.text(entry, revoked)
            found = self.estimator.count_lines(block if last else block + _SEPARATOR)
            self._tokens[key] = found
        return found


def _render_message(entry: SessionEntry, red: Redactor, revoked: bool = False) -> str:
    assert entry.message is not None
    head = f"[{entry.message.role} {entry.id} {entry.timestamp}"
    if entry.message.tool_call_id:
        head += f" result of {entry.message.tool_call_id}"
    body = REVOKED_MARKER if revoked else redacted_entry_text(entry, red)
    return red.text(f"{head}]\n{body}")


def _omitted_line(count: int) -> str:
    return f"[{count} earlier message{'s' if count != 1 else ''} omitted to fit the window cap]"


def recent_message_window(
    entries: Sequence[SessionEntry],
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    *,
    max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    max_bytes: int = RECENT_WINDOW_MAX_BYTES,
    invalidated_ids: Iterable[str] | None = None,
) -> RecentMessageWindow:
    """Select and render the recent-message window within its byte cap."""
    validate_limit("max_bytes", max_bytes, hard_cap=RECENT_WINDOW_MAX_BYTES)
    selected = select_recent_message_entries_from_entries(
        entries, keep_recent_entries, max_tokens=max_tokens, estimator=estimator
    )
    return render_message_window(
        selected, secrets=secrets, max_bytes=max_bytes, invalidated_ids=invalidated_ids
    )


def render_message_window(
    selected: Sequence[SessionEntry],
    *,
    secrets: Iterable[str] | Redactor | None = None,
    max_bytes: int = RECENT_WINDOW_MAX_BYTES,
    invalidated_ids: Iterable[str] | None = None,
    omitted_note: str | None = None,
    blocks_of: MessageBlocks | None = None,
) -> RecentMessageWindow:
    """Render chosen messages (oldest first) as the window, within ``max_bytes``.

    The oldest are dropped first to fit, with a first line saying how many; a newest
    message that alone is too large is cut, with a marker. ``omitted_note`` is a first
    line the caller's own selection needs (messages it left out), kept before the rest.
    """
    validate_limit("max_bytes", max_bytes, hard_cap=RECENT_WINDOW_MAX_BYTES)
    red = redactor(secrets) if blocks_of is None else blocks_of.red
    invalid = frozenset(invalidated_ids or ())
    if blocks_of is None:
        blocks = [_render_message(e, red, e.id in invalid) for e in selected]
    else:
        blocks = [blocks_of.text(e, e.id in invalid) for e in selected]
    sizes = [utf8_len(b) for b in blocks]
    sep = utf8_len(_SEPARATOR)
    note = utf8_len(omitted_note) + sep if omitted_note else 0

    # Keep the newest messages that fit, counting the omission line they would need.
    kept = 0
    used = note
    for index in range(len(blocks) - 1, -1, -1):
        grown = used + sizes[index] + (sep if kept else 0)
        omitted = index  # messages older than this one
        marker = utf8_len(_omitted_line(omitted)) + sep if omitted else 0
        if grown + marker > max_bytes:
            break
        used, kept = grown, kept + 1

    truncated_id = None
    if kept == 0 and blocks:
        # The newest message alone does not fit: show its beginning, cut on a character.
        kept = 1
        omitted = len(blocks) - 1
        budget = max_bytes - note - (utf8_len(_omitted_line(omitted)) + sep if omitted else 0)
        blocks[-1] = truncate_utf8(blocks[-1], max(budget, 0), _CUT_MARKER)
        truncated_id = selected[-1].id

    shown = selected[len(selected) - kept :]
    dropped = selected[: len(selected) - kept]
    parts = blocks[len(blocks) - kept :]
    if dropped:
        parts.insert(0, _omitted_line(len(dropped)))
    if omitted_note:
        parts.insert(0, omitted_note)
    text = _SEPARATOR.join(parts)
    tokens = None
    if utf8_len(text) > max_bytes:  # only when max_bytes is too small for even a marker
        text = truncate_utf8(text, max_bytes)
    elif (
        blocks_of is not None
        and truncated_id is None
        and shown
        and blocks_of.estimator.counts_add_up_by_line
    ):
        # Otherwise (an estimator that rounds per text) the whole text is counted below.
        est = blocks_of.estimator
        heads = parts[: len(parts) - len(shown)]  # the note and omission lines, if any
        tokens = sum(est.count_lines(h + _SEPARATOR) for h in heads)
        tokens += sum(
            blocks_of.tokens(e, e.id in invalid, i == len(shown) - 1) for i, e in enumerate(shown)
        )
    return RecentMessageWindow(
        entries=tuple(shown),
        text=text,
        omitted_entry_ids=tuple(e.id for e in dropped),
        truncated_entry_id=truncated_id,
        withheld_entry_ids=tuple(e.id for e in shown if e.id in invalid),
        tokens=tokens,
    )


def render_recent_message_window_from_entries(
    entries: Sequence[SessionEntry],
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES,
    *,
    max_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    max_bytes: int = RECENT_WINDOW_MAX_BYTES,
    invalidated_ids: Iterable[str] | None = None,
) -> str:
    """The text of the recent-message window (see ``recent_message_window``)."""
    return recent_message_window(
        entries,
        keep_recent_entries,
        max_tokens=max_tokens,
        estimator=estimator,
        secrets=secrets,
        max_bytes=max_bytes,
        invalidated_ids=invalidated_ids,
    ).text
