"""What the provider sees on a turn: context blocks, then the branch since its compaction.

After a compaction the provider sees the compaction summary, the messages the compaction
kept, and everything appended after it. When a context provider supplies a
``recent-messages`` block, the raw branch tail is not sent again: the block already holds
it, and the current turn's own messages follow as real messages.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Iterable, Sequence
from typing import Protocol

from ..core.withheld import REVOKED_MARKER, check_invalidation_ids
from ..entries import Message, SessionEntry
from ..providers.base import ProviderMessage, ProviderRequest
from ..session import Session
from ..tokens import MESSAGE_OVERHEAD_TOKENS, TokenEstimator, get_estimator

__all__ = [
    "RECENT_MESSAGES_BLOCK",
    "ContextProvider",
    "HostBlock",
    "estimate_request_tokens",
    "history_since_compaction",
    "load_history_since_compaction",
    "render_system",
    "to_provider_messages",
    "withhold_revoked",
]

RECENT_MESSAGES_BLOCK = "recent-messages"


class HostBlock(Protocol):
    """A named block of context text (``ContextBlock`` of observational memory is one)."""

    @property
    def name(self) -> str: ...

    @property
    def text(self) -> str: ...


class ContextProvider(Protocol):
    """Supplies context blocks for a session's next provider call."""

    def blocks(self, session: Session) -> Awaitable[Sequence[HostBlock]]: ...


def withhold_revoked(
    entries: Sequence[SessionEntry], invalidated_ids: Iterable[str] = ()
) -> list[SessionEntry]:
    """``entries`` with each revoked message replaced by ``[revoked] <id>`` and no text.

    Shown as the recent-messages block shows it: the place stays, nothing it said (nor its
    tool-call arguments) does. A revoked tool result keeps its call id, so the pairing the
    providers insist on holds.
    """
    invalid = check_invalidation_ids(invalidated_ids)
    if not invalid:
        return list(entries)
    out: list[SessionEntry] = []
    for entry in entries:
        if entry.id in invalid and entry.message is not None:
            message = Message(
                role=entry.message.role,
                content=f"{REVOKED_MARKER} {entry.id}",
                tool_call_id=entry.message.tool_call_id,
            )
            entry = entry.model_copy(update={"message": message})
        out.append(entry)
    return out


def history_since_compaction(
    branch: Sequence[SessionEntry], invalidated_ids: Iterable[str] = ()
) -> list[SessionEntry]:
    """The branch as the provider should see it: from the latest compaction on.

    The compaction entry itself stands for the summary; its ``keepEntryIds`` (messages it
    kept verbatim) come next, then every entry appended after it. Messages named by
    ``invalidated_ids`` are withheld (:func:`withhold_revoked`).
    """
    for index in range(len(branch) - 1, -1, -1):
        entry = branch[index]
        if entry.kind != "compaction":
            continue
        keep = set((entry.data or {}).get("keepEntryIds") or ())
        kept = [e for e in branch[:index] if e.id in keep]
        return withhold_revoked([entry, *kept, *branch[index + 1 :]], invalidated_ids)
    return withhold_revoked(branch, invalidated_ids)


async def load_history_since_compaction(
    session: Session, invalidated_ids: Iterable[str] = ()
) -> list[SessionEntry]:
    """``history_since_compaction`` of the session's branch, read through the store's index.

    Reads the latest compaction, the entries it kept and the entries after it, so a turn
    costs the history it sends, not the whole transcript before the compaction.
    """
    return withhold_revoked(await _load_history(session), invalidated_ids)


async def _load_history(session: Session) -> list[SessionEntry]:
    store, sid = session.store, session.id
    compaction = await store.last_compaction(sid)
    if compaction is None:
        return await store.entries_after(sid, None)
    keep = list(dict.fromkeys((compaction.data or {}).get("keepEntryIds") or ()))
    found = await store.get_many(keep)
    kept = [
        found[entry_id]
        for entry_id in keep
        if entry_id in found and await store.is_on_branch(sid, entry_id, compaction.id)
    ]
    kept = [e for e in kept if e.id != compaction.id]
    return [compaction, *kept, *await store.entries_after(sid, compaction.id)]


def estimate_request_tokens(
    request: ProviderRequest, estimator: TokenEstimator | None = None
) -> int:
    """Estimated input tokens of a provider request: the system text (context blocks
    included), every message with its framing and tool calls, and the tool definitions."""
    est = estimator or get_estimator()
    # Line by line: a request repeats most lines of the last one (the memory block, the
    # window), and an estimator remembers lines it counted, so only new text is encoded.
    total = est.count_lines(request.system)
    for message in request.messages:
        total += est.count_lines(message.content) + MESSAGE_OVERHEAD_TOKENS
        for call in message.tool_calls:
            total += est.count_lines(call.name) + est.count_lines(call.arguments)
    if request.tools:
        definitions = [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
            for t in request.tools
        ]
        total += est.count_lines(json.dumps(definitions, ensure_ascii=False, sort_keys=True))
    return total


def to_provider_messages(entries: Sequence[SessionEntry]) -> list[ProviderMessage]:
    """Provider messages for message and compaction entries; bookkeeping is skipped."""
    out: list[ProviderMessage] = []
    answered: set[str] = set()
    calls: set[str] = set()
    for entry in entries:
        if entry.message is not None:
            if entry.message.role == "tool":
                # A tool result whose call is not in view (cut by a compaction) would break
                # the call/result pairing providers insist on.
                if entry.message.tool_call_id not in calls:
                    continue
                answered.add(entry.message.tool_call_id or "")
            for call in entry.message.tool_calls or ():
                calls.add(call.id)
            out.append(ProviderMessage.from_message(entry.message))
        elif entry.kind == "compaction":
            out.append(
                ProviderMessage("user", f"[Summary of the earlier conversation]\n{entry.summary}")
            )
    return _drop_unanswered_calls(out, answered)


def _drop_unanswered_calls(
    messages: list[ProviderMessage], answered: set[str]
) -> list[ProviderMessage]:
    """Remove tool calls that never got a result (an interrupted run) from the replay."""
    fixed: list[ProviderMessage] = []
    for message in messages:
        if message.tool_calls and any(c.id not in answered for c in message.tool_calls):
            kept = tuple(c for c in message.tool_calls if c.id in answered)
            if not kept and not message.content:
                continue
            message = ProviderMessage(message.role, message.content, kept)
        fixed.append(message)
    return fixed


def render_system(system: str, blocks: Sequence[HostBlock]) -> str:
    """System text followed by each block, fenced by its name."""
    parts = [system] if system else []
    parts.extend(f"<{b.name}>\n{b.text}\n</{b.name}>" for b in blocks if b.text)
    return "\n\n".join(parts)
