"""``prism-om import FILE``: a transcript from another tool becomes a new session."""

from __future__ import annotations

import argparse

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..importers import import_conversation
from ..importers.api import check_transcript_file
from .common import open_cli_store
from .output import console, error_console, print_json

__all__ = ["cmd_import"]


async def cmd_import(args: argparse.Namespace) -> None:
    # Before the store is opened (or created): a bad FILE leaves nothing behind.
    path = check_transcript_file(args.file)
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

    async with open_cli_store(args.db, create=True) as store:
        with bar:
            result = await import_conversation(
                store, path, format=args.format, session_id=args.session, progress=progress
            )
        url = store.url
    if args.json:
        print_json(
            {
                "sessionId": result.session_id,
                "entries": result.entry_count,
                "leafId": result.leaf_id,
                "format": result.format,
                "label": result.label,
                "store": url,
            }
        )
        return
    console().print(
        f"imported {result.entry_count} entries ({result.label}) from {result.file} "
        f"as session {result.session_id}"
    )
    console().print(f"store: {url}  leaf: {result.leaf_id}")
