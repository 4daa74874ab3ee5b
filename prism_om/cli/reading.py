"""Read-only subcommands: ``sessions``, ``status``, ``view``, ``recall`` and ``page_statement``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from ..core.ledger import RecordedObservation, RecordedReflection
from ..core.redaction import Redactor
from ..entries import SessionEntry, entry_text
from ..errors import CorruptStoreError
from ..observational_memory import (
    create_memory_status_command,
    create_memory_view_command,
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from ..observational_memory.page import BranchPage
from ..observational_memory.recall import MemoryRecall
from ..observational_memory.search import search_observational_memory
from ..reports.entry_text import wire_text
from ..reports.session_list import damaged_sessions, session_rows
from ..reports.thresholds import memory_thresholds, threshold_lines
from .common import CliUsageError, open_cli_store, require_session, store_url
from .output import clip, console, heading, one_line, print_json, table
from .redaction import cli_redactor
from .tombstones import cli_invalidated_ids

__all__ = [
    "cmd_page",
    "cmd_search",
    "cmd_recall",
    "cmd_sessions",
    "cmd_status",
    "cmd_view",
    "describe_entry",
    "print_observations",
    "print_page",
    "print_recall",
    "print_reflections",
]

_PRIORITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}


def describe_entry(entry: SessionEntry) -> tuple[str, str]:
    """A label (role, custom type or kind) and the entry's text on one line."""
    label = entry.role or entry.custom_type or entry.kind
    return label, one_line(entry_text(entry))


def _day(timestamp: str | None) -> str:
    return (timestamp or "")[:10]


def print_observations(
    records: Sequence[RecordedObservation],
    *,
    limit: int | None = None,
    sources: bool = False,
    secrets: Redactor | None = None,
) -> None:
    red = secrets or Redactor()
    shown = records if limit is None else records[:limit]
    rows = []
    for record in shown:
        o = record.observation
        row: list[Any] = [
            o.id,
            _day(o.observed_at),
            o.referenced_date[:10] if o.referenced_date else "",
            Text(o.priority, style=_PRIORITY_STYLE.get(o.priority, "")),
            one_line(red.text(o.text)),
        ]
        if sources:
            row.append(red.text(", ".join(o.source_entry_ids)))
        rows.append(row)
    columns: list[str | tuple[str, dict[str, Any]]] = [
        ("id", {"no_wrap": True}),
        ("observed", {"no_wrap": True}),
        ("refers to", {"no_wrap": True}),
        "priority",
        ("text", {"ratio": 3}),
    ]
    if sources:
        columns.append(("sources", {"ratio": 1, "overflow": "fold"}))
    console().print(table(columns, rows))
    if limit is not None and len(records) > limit:
        console().print(Text(f"… and {len(records) - limit} more", style="dim"))


def print_reflections(
    records: Sequence[RecordedReflection], *, text_limit: int = 0, secrets: Redactor | None = None
) -> None:
    red = secrets or Redactor()
    rows = [
        (
            r.reflection.id,
            _day(r.recorded_at),
            Text(r.reflection.priority, style=_PRIORITY_STYLE.get(r.reflection.priority, "")),
            str(len(r.reflection.observation_ids)),
            clip(red.text(r.reflection.text), text_limit)
            if text_limit
            else one_line(red.text(r.reflection.text)),
        )
        for r in records
    ]
    console().print(
        table(
            [
                ("id", {"no_wrap": True}),
                ("recorded", {"no_wrap": True}),
                "priority",
                ("over", {"justify": "right"}),
                ("text", {"ratio": 1}),
            ],
            rows,
        )
    )


def print_recall(found: MemoryRecall) -> None:
    out = console()
    if found.reason == "revoked":
        out.print(Text(f"[revoked] {found.id}  (withheld: it rests on revoked sources)"))
        return
    if not found.found:
        out.print(f"{found.id}: not found (unknown)")
        return
    out.print(
        Text.assemble((f"{found.kind} {found.id}", "bold"), f"  recorded {found.recorded_at}")
    )
    out.print(Text(f"  {one_line(found.text or '')}"))
    if found.dropped:
        out.print(Text("  (dropped from the active pool; still recallable by id)", style="dim"))
    if found.supporting_observations:
        out.print("supporting observations:")
        for o in found.supporting_observations:
            out.print(Text(f"  {o.get('id')}  {clip(str(o.get('text', '')), 100)}"))
    shown = len(found.sources) + len(found.missing_source_entry_ids)
    if found.sources_offset == 0 and found.next_sources_offset is None:
        out.print(f"exact source entries ({len(found.sources)}):")
    else:
        first = found.sources_offset + 1 if shown else found.sources_offset
        more = (
            f"; --sources-offset {found.next_sources_offset} for the next ones"
            if found.next_sources_offset is not None
            else ""
        )
        out.print(
            f"exact source entries {first}-{found.sources_offset + shown} of "
            f"{found.sources_total}{more}:"
        )
    rows = []
    for source in found.sources:
        message = source.get("message") or {}
        rows.append(
            (
                str(source.get("id", "")),
                str(source.get("timestamp", ""))[:19],
                str(message.get("role") or source.get("kind", "")),
                clip(wire_text(source), 400),
            )
        )
    out.print(
        table([("entry", {"no_wrap": True}), ("time", {"no_wrap": True}), "role", "text"], rows)
    )
    for missing in found.missing_source_entry_ids:
        out.print(Text(f"  missing source entry {missing}", style="red"))


def print_page(page: BranchPage) -> None:
    rows = []
    for item in page.messages:
        if item.get("reason") == "revoked":
            text = "[revoked]"
        elif page.detail == "summary":
            text = one_line(str(item.get("text", ""))) + ("…" if item.get("truncated") else "")
        else:
            # The whole message, as --json has it: a tool call's arguments included.
            text = wire_text({"message": item.get("message")}, arguments=True)
        rows.append((item["id"], str(item["timestamp"])[:19], item["role"], text))
    console().print(
        table([("entry", {"no_wrap": True}), ("time", {"no_wrap": True}), "role", "text"], rows)
    )
    more = f"more: --cursor {page.next_cursor}" if page.next_cursor else "no more messages"
    console().print(Text(f"{len(page.messages)} message(s) {page.direction}; {more}", style="dim"))


# -- subcommands ----------------------------------------------------------------------


async def cmd_sessions(args: argparse.Namespace) -> None:
    async with open_cli_store(args.db) as store:
        rows = cli_redactor(args).value(await session_rows(store))
        damaged = await damaged_sessions(store)
        url = store.url
    if args.json:
        print_json(rows)
    elif not rows:
        console().print(f"no sessions in {url}")
    else:
        _print_session_rows(rows)
    if damaged:
        # After the readable rows: one bad session must not hide the others.
        raise CorruptStoreError(
            f"{len(damaged)} damaged session(s) in {url} left out: "
            + "; ".join(f"{sid}: {error}" for sid, error in damaged.items())
            + " (see 'prism-om check')",
            url=url,
        )


def _print_session_rows(rows: list[dict[str, Any]]) -> None:
    console().print(
        table(
            [
                ("session", {"overflow": "fold"}),
                ("entries", {"justify": "right", "no_wrap": True}),
                ("messages", {"justify": "right", "no_wrap": True}),
                ("leaves", {"justify": "right", "no_wrap": True}),
                ("last activity (UTC)", {"no_wrap": True}),
            ],
            [
                (
                    r["session"],
                    r["entries"],
                    r["messages"],
                    r["leaves"],
                    (r["lastActivity"] or "")[:19].replace("T", " "),
                )
                for r in rows
            ],
        )
    )


async def cmd_status(args: argparse.Namespace) -> None:
    async with open_cli_store(args.db) as store:
        await require_session(store, args.session)
        invalid = await cli_invalidated_ids(store, args)
        command = create_memory_status_command(
            store=store,
            keep_recent_entries=args.recent_messages,
            invalidated_ids=invalid,
            secrets=cli_redactor(args),
        )
        result = await command.run("", session_id=args.session)
        figures = await memory_thresholds(store, args.session, invalid)
    if args.json:
        print_json({**result.data, **figures})
    else:
        console().print(result.text)
        for line in threshold_lines(figures):
            console().print(line)


async def cmd_view(args: argparse.Namespace) -> None:
    async with open_cli_store(args.db) as store:
        await require_session(store, args.session)
        command = create_memory_view_command(
            store=store,
            keep_recent_entries=args.recent_messages,
            invalidated_ids=await cli_invalidated_ids(store, args),
            secrets=cli_redactor(args),
        )
        result = await command.run("full" if args.full else "", session_id=args.session)
    if args.json:
        print_json({**result.data, "text": result.text})
    else:
        console().print(result.text)


async def cmd_recall(args: argparse.Namespace) -> None:
    async with open_cli_store(args.db) as store:
        await require_session(store, args.session)
        found = await recall_observational_memory(
            store,
            args.id,
            session_id=args.session,
            invalidated_ids=await cli_invalidated_ids(store, args),
            sources_offset=args.sources_offset,
            secrets=cli_redactor(args),
        )
    if args.json:
        print_json(found.to_json())
    elif found.found or found.reason == "revoked":
        print_recall(found)
    # A revoked id is an answer (withheld, exit 0); an unknown one is bad input.
    if not found.found and found.reason != "revoked":
        raise CliUsageError(
            f"memory id {args.id!r} is unknown on the current branch of {args.session!r}",
            memory_id=args.id,
            session_id=args.session,
            url=store_url(args.db),
        )


async def cmd_page(args: argparse.Namespace) -> None:
    async with open_cli_store(args.db) as store:
        await require_session(store, args.session)
        page = await recall_observational_memory_branch_page(
            store,
            args.cursor,
            session_id=args.session,
            limit=args.limit,
            direction="backward" if args.backward else "forward",
            detail=args.detail,
            invalidated_ids=await cli_invalidated_ids(store, args),
            secrets=cli_redactor(args),
        )
    if args.json:
        print_json(page.to_json())
    else:
        heading("page", cli_redactor(args).text(f"{args.session} from {args.cursor}"))
        print_page(page)


async def cmd_search(args: argparse.Namespace) -> None:
    red = cli_redactor(args)
    async with open_cli_store(args.db) as store:
        await require_session(store, args.session)
        results = await search_observational_memory(
            store,
            args.session,
            args.query,
            limit=args.limit,
            kinds=args.kinds,
            include_inactive=args.include_inactive,
            invalidated_ids=await cli_invalidated_ids(store, args),
            secrets=red,
        )
    if args.json:
        # Ids are redacted too: a secret may sit inside an entry id.
        print_json(red.value({"results": results.to_json()["results"]}))
        return
    heading("search", red.text(f"{args.session}: {args.query}"))
    rows = []
    for hit in results.hits:
        kind = hit.kind if hit.status == "active" else f"{hit.kind} ({hit.status})"
        sources = ", ".join(red.text(s) for s in hit.source_entry_ids[:3])
        if len(hit.source_entry_ids) > 3:
            sources += f" +{len(hit.source_entry_ids) - 3}"
        rows.append(
            (red.text(hit.id), kind, f"{hit.score:.3f}", hit.timestamp[:19], hit.text, sources)
        )
    console().print(
        table(
            [
                ("id", {"no_wrap": True}),
                ("kind", {"no_wrap": True}),
                "score",
                ("time", {"no_wrap": True}),
                "text",
                "sources",
            ],
            rows,
        )
    )
    console().print(
        Text(
            f"{len(rows)} hit(s); expand one with: prism-om recall ID (memory) or "
            "prism-om page --cursor ID (message)",
            style="dim",
        )
    )
