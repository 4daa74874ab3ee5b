"""``prism-om import FILE``: a transcript from another tool becomes a new session, or
continues one (``--append``: only the messages the session does not hold yet)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..importers import import_conversation, parse_conversation
from ..importers.api import check_transcript_file, memory_refusal
from ..importers.times import parse_start_time, validate_interval
from ..stores import parse_store_url
from .common import CliUsageError, open_cli_store, store_url
from .output import console, error_console, print_json

__all__ = ["cmd_import"]


def _would_create(db: str) -> bool:
    scheme, target = parse_store_url(store_url(db))
    return scheme != "memory" and not Path(target).exists()


async def cmd_import(args: argparse.Namespace) -> None:
    # Before the store is opened (or created): a bad FILE or option leaves nothing behind.
    path = check_transcript_file(args.file)
    start_time = parse_start_time(args.start_time)
    interval = validate_interval(args.interval)
    if args.append and args.session is None:
        raise CliUsageError("--append needs --session NAME: the session to continue")
    if args.allow_earlier and not args.append:
        raise CliUsageError("--allow-earlier applies to --append only")
    err = error_console()
    # A bar only where someone watches it; it disappears once the import is done.
    bar = Progress(
        TextColumn("reading {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=args.json or not err.is_terminal,
    )
    task = bar.add_task(path.name, total=None)

    def progress(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    if await asyncio.to_thread(_would_create, args.db):
        # A malformed file must not leave a new, empty store behind: with no store yet
        # there is nothing to collide with, so check the file before creating one.
        plan = await asyncio.to_thread(
            parse_conversation,
            path,
            format=args.format,
            session_id=args.session,
            start_time=start_time,
            interval=interval,
        )
        if plan.memory_records and not args.drop_memory:
            raise memory_refusal(plan)
    async with open_cli_store(args.db, create=True) as store:
        with bar:
            result = await import_conversation(
                store,
                path,
                format=args.format,
                session_id=args.session,
                progress=progress,
                start_time=start_time,
                interval=interval,
                append=args.append,
                allow_earlier=args.allow_earlier,
                drop_memory=args.drop_memory,
            )
        url = store.url
    dating = result.times.describe()
    if dating is not None:
        # Said even with --json (on stderr): dates the file did not give are never silent.
        if result.times.from_import_time:
            dating += "; pass --start-time ISO to give the first message's real time"
        err.print(f"prism-om: note: {dating}", soft_wrap=True)
    if args.json:
        print_json(
            {
                "sessionId": result.session_id,
                "entries": result.entry_count,
                "leafId": result.leaf_id,
                "format": result.format,
                "label": result.label,
                "store": url,
                "appended": result.appended,
                "skipped": result.skipped,
                "times": {
                    "own": result.times.own,
                    "filled": result.times.filled,
                    "fallback": result.times.fallback,
                    "interval": result.times.interval,
                    "first": result.times.first,
                    "last": result.times.last,
                    "fromStart": result.times.from_start,
                    "fromNeighbours": result.times.from_neighbours,
                    "fromImportTime": result.times.from_import_time,
                    "ignored": result.times.ignored,
                    "startTimeUnused": result.times.start_time_unused,
                },
            }
        )
        return
    if result.appended:
        console().print(
            f"appended {result.entry_count} new message(s) ({result.label}) from "
            f"{result.file} to session {result.session_id}; {result.skipped} already there "
            "were skipped"
        )
    else:
        console().print(
            f"imported {result.entry_count} entries ({result.label}) from {result.file} "
            f"as session {result.session_id}"
        )
    console().print(f"store: {url}  leaf: {result.leaf_id}")
