"""What a turn's request shows raw: every message memory has not covered, and the last few.

The rule, written once for every path that builds a request or shows "the next turn's
context" (the attached agent, the SDK session, ``om:view``, MCP, the inspector, compaction's
``keepEntryIds``): the window holds

* every eligible message after the observer's coverage (the *uncovered tail*): memory does
  not hold them yet, so leaving one out would put it in neither place;
* and at least the last ``keep_recent_entries`` eligible messages, covered or not.

``recent_message_max_tokens`` then trims only messages memory already covers (oldest first,
never the newest one). When a budget is given (what the model's input leaves for the
window) and the uncovered tail alone exceeds it, the newest uncovered messages that fit are
kept and the rest are reported in ``omitted_uncovered_ids`` so the host can say so (a
warning event) or observe first; the rendered window then starts with a line naming what
was left out and the cursor to recall it by. Nothing is ever dropped silently.

This goes beyond the specification's recent-message window on purpose (see
``docs/design.md``, "What a turn's request holds"); the exported
``select_recent_message_entries`` / ``render_recent_message_window`` keep its meaning.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..entries import SessionEntry
from ..tokens import MESSAGE_OVERHEAD_TOKENS, TokenEstimator, get_estimator
from .branch_snapshot import BranchSnapshot
from .limits import RECENT_WINDOW_MAX_BYTES, validate_limit
from .recent_window import (
    MessageBlocks,
    RecentMessageWindow,
    check_keep_recent_entries,
    render_message_window,
)
from .redaction import Redactor
from .sources import is_eligible_observation_source_entry

__all__ = [
    "RequestWindow",
    "message_tokens",
    "request_message_window",
    "select_request_window",
]


@dataclass(frozen=True)
class RequestWindow:
    """The messages a request shows raw, and what the rule did to choose them."""

    selected: tuple[SessionEntry, ...]
    """Chosen messages, oldest first, before rendering."""
    uncovered_ids: frozenset[str]
    """The chosen messages memory does not cover yet."""
    trimmed_ids: tuple[str, ...] = ()
    """Covered messages ``recent_message_max_tokens`` trimmed, oldest first."""
    omitted_uncovered_ids: tuple[str, ...] = ()
    """Uncovered messages left out because the budget could not hold them, oldest first:
    never silent (the host warns, or observes first)."""
    tail_complete: bool = True
    """False when the snapshot read only the newest part of a very long tail."""
    rendered: RecentMessageWindow | None = None
    """The rendered window (``request_message_window``)."""

    @property
    def dropped_uncovered_ids(self) -> tuple[str, ...]:
        """Uncovered messages the request does not show whole: left out by the budget, or
        by the window's byte cap when rendered (oldest first)."""
        capped = () if self.rendered is None else self.rendered.omitted_entry_ids
        return (*self.omitted_uncovered_ids, *(i for i in capped if i in self.uncovered_ids))


def message_tokens(entry: SessionEntry, estimator: TokenEstimator) -> int:
    """Tokens of a message as a window shows it: its text, counted line by line (an
    estimator remembers lines, so a message seen last turn costs a lookup), plus framing."""
    message = entry.message
    if message is not None and not message.tool_calls and isinstance(message.content, str):
        return estimator.count_lines(message.content) + MESSAGE_OVERHEAD_TOKENS
    return estimator.count_entry(entry)


def select_request_window(
    tail: Sequence[SessionEntry],
    recent: Sequence[SessionEntry],
    keep_recent_entries: int,
    *,
    max_tokens: int | None = None,
    budget_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
    tail_complete: bool = True,
) -> RequestWindow:
    """Choose the window from the uncovered ``tail`` (entries after the coverage, root side
    first) and the branch's last ``recent`` eligible messages (oldest first)."""
    keep = check_keep_recent_entries(keep_recent_entries)
    if max_tokens is not None:
        validate_limit("max_tokens", max_tokens)
    if budget_tokens is not None:
        validate_limit("budget_tokens", budget_tokens)
    est = estimator or get_estimator()
    uncovered = [e for e in tail if is_eligible_observation_source_entry(e)]
    uncovered_ids = {e.id for e in uncovered}
    last = list(recent[max(len(recent) - keep, 0) :]) if keep else []
    covered = [e for e in last if e.id not in uncovered_ids]
    omitted: list[str] = []
    if budget_tokens is not None:
        used = 0
        fits = len(uncovered)
        for index in range(len(uncovered) - 1, -1, -1):
            used += message_tokens(uncovered[index], est)
            if used > budget_tokens and index < len(uncovered) - 1:
                fits = len(uncovered) - 1 - index
                break
        if fits < len(uncovered):
            omitted = [e.id for e in uncovered[: len(uncovered) - fits]]
            uncovered = uncovered[len(uncovered) - fits :]
            covered = []  # the budget cannot even hold what memory lacks
            uncovered_ids = {e.id for e in uncovered}
    trimmed: list[str] = []
    if max_tokens is not None and covered:
        # Only covered messages may go, oldest first; the newest message always stays.
        total = sum(message_tokens(e, est) for e in (*covered, *uncovered))
        newest = (uncovered or covered)[-1].id
        while covered and total > max_tokens and covered[0].id != newest:
            gone = covered.pop(0)
            total -= message_tokens(gone, est)
            trimmed.append(gone.id)
    chosen = {e.id for e in covered} | uncovered_ids
    ordered = _branch_order([*covered, *uncovered], chosen)
    return RequestWindow(
        selected=tuple(ordered),
        uncovered_ids=frozenset(uncovered_ids),
        trimmed_ids=tuple(trimmed),
        omitted_uncovered_ids=tuple(omitted),
        tail_complete=tail_complete,
    )


def _branch_order(messages: Iterable[SessionEntry], chosen: set[str]) -> list[SessionEntry]:
    """``messages`` (covered ones first, then the tail) in branch order, each once.

    Covered messages all precede the coverage cursor and the tail follows it, so the
    covered ones (in their own order) then the tail's is branch order already."""
    seen: set[str] = set()
    out: list[SessionEntry] = []
    for entry in messages:
        if entry.id in chosen and entry.id not in seen:
            seen.add(entry.id)
            out.append(entry)
    return out


def request_message_window(
    snapshot: BranchSnapshot,
    keep_recent_entries: int,
    *,
    max_tokens: int | None = None,
    budget_tokens: int | None = None,
    estimator: TokenEstimator | None = None,
    secrets: Iterable[str] | Redactor | None = None,
    max_bytes: int = RECENT_WINDOW_MAX_BYTES,
    invalidated_ids: Iterable[str] | None = None,
    blocks_of: MessageBlocks | None = None,
) -> RequestWindow:
    """Choose (``select_request_window``) and render the window of ``snapshot``
    (``blocks_of``: each message's block kept from earlier renders)."""
    chosen = select_request_window(
        snapshot.tail,
        snapshot.recent,
        keep_recent_entries,
        max_tokens=max_tokens,
        budget_tokens=budget_tokens,
        estimator=estimator,
        tail_complete=snapshot.tail_complete,
    )
    note = None
    left_out = len(chosen.omitted_uncovered_ids) + (0 if snapshot.tail_complete else 1)
    if left_out and chosen.selected:
        cursor = chosen.selected[0].id
        note = (
            "[earlier messages not yet in memory were left out to fit the model's input: "
            f"recall them with cursor {cursor!r} and direction 'backward']"
        )
    rendered = render_message_window(
        chosen.selected,
        secrets=secrets,
        max_bytes=max_bytes,
        invalidated_ids=invalidated_ids,
        omitted_note=note,
        blocks_of=blocks_of,
    )
    return RequestWindow(
        selected=chosen.selected,
        uncovered_ids=chosen.uncovered_ids,
        trimmed_ids=chosen.trimmed_ids,
        omitted_uncovered_ids=chosen.omitted_uncovered_ids,
        tail_complete=chosen.tail_complete,
        rendered=rendered,
    )
