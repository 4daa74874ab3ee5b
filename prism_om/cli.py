"""The ``prism-om`` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from .entries import SessionEntry, entry_text
from .errors import InvalidInputError, PrismMemoryError, StoreRuleError
from .session import Session
from .stores import SessionStore, open_store

__all__ = ["main"]

DEFAULT_DEMO_DB = "prism-om-demo.db"

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _store_url(value: str) -> str:
    """Accept a store URL, or a bare path meaning a SQLite file."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", value):
        return value  # a URL; open_store names the schemes it knows if this is not one
    return f"sqlite:{value}"


DEMO_TURNS: tuple[tuple[str, str], ...] = (
    ("user", "I'm Dana. We ship the billing service to staging on Friday 2026-12-04."),
    ("assistant", "Noted: billing goes to staging on Friday 4 December. Any blockers?"),
    ("user", "The Postgres migration 0042 must run first; Sam owns it."),
    ("assistant", "Then the order is: Sam runs migration 0042, then we deploy billing."),
)


def _describe(entry: SessionEntry) -> str:
    label = entry.role or entry.custom_type or entry.kind
    text = " ".join(entry_text(entry).split())
    return f"{entry.id}  {label:<9} {text[:96]}"


async def _demo(db: str, out: list[str]) -> None:
    path = Path(db)
    if path.exists():
        path.unlink()
    async with await open_store(_store_url(db)) as store:
        session = Session(store, "demo")
        for role, text in DEMO_TURNS:
            await session.append_message(role, text)  # type: ignore[arg-type]
        out.append(f"store: sqlite:{path.resolve()}")
        out.append(f"session {session.id!r}, leaf {await session.leaf()}")
        out.append("branch, root first:")
        out.extend("  " + _describe(e) for e in await session.entries())


async def _sessions(store: SessionStore, as_json: bool, out: list[str]) -> None:
    rows = []
    for sid in await store.sessions():
        listed = await store.list(sid)
        rows.append(
            {
                "session": sid,
                "entries": len(listed),
                "leaf": await store.leaf(sid),
                "leaves": len(await store.leaves(sid)),
                "lastActivity": max(e.timestamp for e in listed) if listed else None,
            }
        )
    if as_json:
        out.append(json.dumps(rows, indent=2))
        return
    for row in rows:
        out.append(
            f"{row['session']}  {row['entries']} entries  {row['leaves']} leaves  "
            f"leaf {row['leaf']}  last {row['lastActivity']}"
        )


async def _branch(store: SessionStore, session_id: str, as_json: bool, out: list[str]) -> None:
    if not await store.list(session_id):
        raise StoreRuleError(f"no session {session_id!r} in {store.url}")
    entries = await store.branch(session_id)
    if as_json:
        out.append(json.dumps([e.to_wire() for e in entries], indent=2, ensure_ascii=False))
    else:
        out.extend(_describe(e) for e in entries)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prism-om",
        description="Durable, source-backed observational memory for long agent sessions.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a short session end to end on a fresh SQLite file")
    demo.add_argument(
        "--db",
        default=DEFAULT_DEMO_DB,
        help=f"SQLite file to (re)create (default: {DEFAULT_DEMO_DB})",
    )
    for name, text in (("sessions", "list sessions"), ("branch", "print a session's branch")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument(
            "--db", required=True, help="store URL (sqlite:FILE, jsonl:DIR) or a SQLite file"
        )
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "branch":
            cmd.add_argument("session", help="session id")
    return parser


async def _run(args: argparse.Namespace, out: list[str]) -> None:
    if args.command == "demo":
        await _demo(args.db, out)
        return
    async with await open_store(_store_url(args.db)) as store:
        if args.command == "sessions":
            await _sessions(store, args.json, out)
        else:
            await _branch(store, args.session, args.json, out)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``prism-om`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    out: list[str] = []
    try:
        asyncio.run(_run(args, out))
    except PrismMemoryError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"prism-om: error: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, InvalidInputError | StoreRuleError) else EXIT_FAILURE
    print("\n".join(out))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
