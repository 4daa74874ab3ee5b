"""Argument wiring, error handling and exit codes of the ``prism-om`` command."""

from __future__ import annotations

import argparse
import asyncio
import sys
import traceback
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NoReturn

from ..core.limits import MAX_SAFE_INTEGER
from ..core.redaction import url_passwords
from ..errors import InvalidInputError, PrismMemoryError, StoreRuleError
from .common import (
    DEFAULT_DB,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    CliUsageError,
    count_argument,
    entry_id_argument,
    memory_id_argument,
    session_id_argument,
)
from .redaction import SECRETS_ENV, add_secret_option, cli_secrets, redacting_stderr
from .tombstones import TOMBSTONE_COMMANDS, add_tombstone_scope
from .warning_lines import warning_lines

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, None]]

EPILOG = f"""\
exit codes:
  0  success
  1  a store or runtime failure (unreadable store, a memory worker that failed, ...)
  2  bad input or usage: unknown option, missing session or store, malformed import
     file, invalid id, page over the cap, unknown SQL dialect
  130 interrupted
Errors print one line, 'prism-om: error: ...', on stderr; --debug adds the traceback.

--db takes a store URL (sqlite:FILE, jsonl:DIR, postgresql://user@host/db?schema=NAME) or a
bare path, meaning a SQLite file; a server store exists once its tables do, and read
commands never create them;
the default is {DEFAULT_DB} in the current directory, the file 'prism-om demo' writes.

secrets: status, view, recall, page, search, observe, compact, sessions, check, inspect and mcp
replace every exact secret value with [REDACTED] in what they print or answer, ids
included (and observe/compact in what they record); every command redacts what it
prints on stderr. A URL's password is never printed: it shows as ***.
Give them in ${SECRETS_ENV}, one per line (a secret may hold commas or spaces), or
with --secret VALUE, repeatable. Text shown for a person has control characters
escaped (\\x1b, \\u202e); --json output is plain JSON.
"""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr, exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"prism-om: error: {message} (see '{self.prog} --help')\n")
        sys.exit(EXIT_USAGE)


def _handler(name: str) -> Handler:
    """The subcommand's coroutine, imported on use so ``--help`` stays quick."""

    async def run(args: argparse.Namespace) -> None:
        if name == "demo":
            from .demo import cmd_demo as chosen
        elif name == "import":
            from .importing import cmd_import as chosen
        elif name in ("observe", "compact"):
            from . import memory

            chosen = memory.cmd_observe if name == "observe" else memory.cmd_compact
        elif name == "check":
            from .check import cmd_check as chosen
        elif name == "schema":
            from .schema import cmd_schema as chosen
        elif name == "migrate":
            from .migrate import cmd_migrate as chosen
        elif name == "copy":
            from .copy import cmd_copy as chosen
        elif name == "delete":
            from .delete import cmd_delete as chosen
        elif name == "mcp":
            from .mcp import cmd_mcp as chosen
        elif name == "eval":
            from .evaluate import cmd_eval as chosen
        elif name == "inspect":
            from .inspect import cmd_inspect as chosen
        else:
            from . import reading

            chosen = getattr(reading, f"cmd_{name}")
        await chosen(args)

    return run


# Piped output is not wrapped, whatever COLUMNS an environment exports (see output.py).
WIDTH_HELP = "wrap text output at N columns (default: the terminal's; unwrapped when piped)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="prism-om",
        description="Durable, source-backed observational memory for long agent sessions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"prism-om {_version()}")
    parser.add_argument("--width", type=count_argument(20, 100_000), metavar="N", help=WIDTH_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    common = _Parser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    common.add_argument(
        "--width",
        type=count_argument(20, 100_000),
        default=argparse.SUPPRESS,
        metavar="N",
        help=WIDTH_HELP,
    )
    store = _Parser(add_help=False)
    store.add_argument(
        "--db",
        default=DEFAULT_DB,
        metavar="URL",
        help=f"store URL (sqlite:FILE, jsonl:DIR) or SQLite file (default: {DEFAULT_DB})",
    )
    as_json = _Parser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print machine-readable JSON")
    session = _Parser(add_help=False)
    session.add_argument(
        "--session", required=True, type=session_id_argument, metavar="ID", help="session id"
    )
    redact = _Parser(add_help=False)
    add_secret_option(redact)
    recent = _Parser(add_help=False)
    recent.add_argument(
        "--recent-messages",
        type=count_argument(0, MAX_SAFE_INTEGER),
        default=8,
        metavar="N",
        help="context.recent_messages the agent uses (default: 8)",
    )

    def add(name: str, help: str, *parents: _Parser) -> argparse.ArgumentParser:
        cmd = sub.add_parser(
            name,
            help=help,
            description=help,
            parents=[common, *parents],
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        cmd.set_defaults(handler=_handler(name))
        return cmd

    demo = add("demo", "replay a recorded conversation through the whole memory lifecycle")
    demo.add_argument(
        "--db",
        default=DEFAULT_DB,
        metavar="URL",
        help=f"store URL or SQLite file (default: ./{DEFAULT_DB}); of the sessions it "
        "holds, only an earlier demo's are replaced",
    )
    demo.add_argument(
        "--force",
        action="store_true",
        help="write into a store that holds sessions the demo did not make (they are kept)",
    )

    imp = add(
        "import",
        "import a transcript file as a new session (--append: continue one)",
        store,
        as_json,
    )
    imp.add_argument("file", metavar="FILE", help="the transcript file")
    imp.add_argument(
        "--format",
        choices=("openai", "pi", "native"),
        help="the file's format (default: detected)",
    )
    imp.add_argument(
        "--session", type=session_id_argument, metavar="NAME", help="name of the new session"
    )
    imp.add_argument(
        "--start-time",
        metavar="ISO",
        help="time of the first message when the file has none (ISO 8601; naive is UTC; "
        "default: count back from the import time)",
    )
    imp.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="seconds between messages the import dates itself (default: 1)",
    )
    imp.add_argument(
        "--append",
        action="store_true",
        help="continue the existing --session: add the file's messages it does not hold "
        "yet (same id or same role, text and time) after its leaf; a second append of the "
        "same file adds nothing",
    )
    imp.add_argument(
        "--allow-earlier",
        action="store_true",
        help="with --append: also add messages dated before the session's leaf",
    )
    imp.add_argument(
        "--drop-memory",
        action="store_true",
        help="import a native session file that holds memory records: keep them as "
        "history entries and let 'observe' rebuild the memory (refused without it)",
    )

    observe = add("observe", "run the observer and reflector once", store, session, as_json, redact)
    observe.add_argument("--force", action="store_true", help="ignore the token thresholds")
    observe.add_argument(
        "--provider",
        choices=("offline", "openai"),
        default="offline",
        help="offline: deterministic extractive workers (default); openai: any "
        "OpenAI-compatible endpoint",
    )
    observe.add_argument(
        "--skip-failing",
        action="store_true",
        help="flush again while the observer keeps failing, so a chunk that always fails "
        "is retried smaller and a lone message that still fails is skipped (with a warning)",
    )
    observe.add_argument("--base-url", metavar="URL", help="endpoint for --provider openai")
    observe.add_argument("--model", metavar="NAME", help="model for --provider openai")
    observe.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="NAME",
        help="environment variable holding the API key (default: OPENAI_API_KEY)",
    )

    compact = add(
        "compact",
        "append a compaction entry that renders the memory",
        store,
        session,
        recent,
        as_json,
        redact,
    )
    compact.add_argument(
        "--force", action="store_true", help="compact even when there is no memory to render"
    )
    add(
        "status",
        "observational-memory counts and token sizes (om:status)",
        store,
        session,
        recent,
        as_json,
        redact,
    )
    view = add(
        "view", "the memory the agent sees (om:view)", store, session, recent, as_json, redact
    )
    view.add_argument("--full", action="store_true", help="all active memory, not only visible")

    recall = add(
        "recall",
        "an observation or reflection with its exact sources",
        store,
        session,
        as_json,
        redact,
    )
    recall.add_argument("id", type=memory_id_argument, metavar="ID", help="a 12-hex memory id")
    recall.add_argument(
        "--sources-offset",
        type=count_argument(0, MAX_SAFE_INTEGER),
        default=0,
        metavar="N",
        help="skip the first N cited sources (a recall shows at most 100 at a time)",
    )

    page = add(
        "page", "a page of raw messages around a cursor entry", store, session, as_json, redact
    )
    page.add_argument(
        "--cursor",
        required=True,
        type=entry_id_argument,
        metavar="ID",
        help="an entry id on the branch",
    )
    page.add_argument("--backward", action="store_true", help="page before the cursor")
    page.add_argument(
        "--limit", type=int, metavar="N", help="messages per page (default 20, max 100)"
    )
    page.add_argument(
        "--detail", choices=("summary", "full"), default="summary", help="default: summary"
    )

    search = add(
        "search",
        "ranked search of a session's memory and messages, every hit with its sources",
        store,
        session,
        as_json,
        redact,
    )
    search.add_argument("query", metavar="QUERY", help="words to look for (at most 500 chars)")
    search.add_argument(
        "--limit",
        type=count_argument(1, 100),
        default=10,
        metavar="N",
        help="hits at most (default 10, max 100)",
    )
    search.add_argument(
        "--kind",
        action="append",
        dest="kinds",
        choices=("observation", "reflection", "message"),
        help="only hits of this kind (repeatable; default: all)",
    )
    search.add_argument(
        "--include-inactive",
        action="store_true",
        help="dropped observations and superseded reflections too, marked as such",
    )

    add(
        "sessions",
        "list sessions with entry counts, leaves and last activity",
        store,
        as_json,
        redact,
    )

    check = add(
        "check",
        "find damaged store files (JSONL sessions; SQLite quick_check, rows, memory; "
        "PostgreSQL rows and memory); --repair saves what is readable",
        store,
        as_json,
        redact,  # a damaged field quoted in a problem can hold a secret
    )
    check.add_argument(
        "--repair",
        action="store_true",
        help="after a backup copy: cut damaged JSONL sessions back to their last valid "
        "entry; copy a damaged SQLite store's readable sessions into a new file",
    )
    check.add_argument("--backup", metavar="PATH", help="where --repair copies damaged files")
    check.add_argument("--output", metavar="FILE", help="SQLite --repair: the new file")

    schema = add("schema", "print schema.sql, transpiled to another SQL dialect", as_json)
    schema.add_argument(
        "--dialect", default="sqlite", metavar="NAME", help="sqlglot dialect (default: sqlite)"
    )

    migrate = add(
        "migrate",
        "bring a store of an older schema version to this version, in place (read "
        "commands open stores read-only and never migrate)",
        store,
        as_json,
    )
    migrate.add_argument(
        "--backup",
        metavar="FILE",
        help="SQLite: copy the file as it was to FILE first (an older prism-om cannot "
        "open the migrated file)",
    )

    copy = add(
        "copy",
        "copy every session (entries, branches, leaf) from one store into another, "
        "skipping or completing what the target holds, then verify the counts",
        as_json,
    )
    copy.add_argument("--from", dest="source", required=True, metavar="URL", help="source store")
    copy.add_argument(
        "--to", dest="target", required=True, metavar="URL", help="target store (created)"
    )
    copy.add_argument(
        "--session",
        action="append",
        type=session_id_argument,
        metavar="ID",
        help="copy only this session (repeatable; default: every session)",
    )

    delete = add(
        "delete",
        "erase a session: every entry, branch and memory record (asks first; --yes in scripts)",
        store,
        as_json,
    )
    delete.add_argument(
        "session_id", type=session_id_argument, metavar="SESSION", help="the session to erase"
    )
    delete.add_argument(
        "--yes",
        action="store_true",
        help="do not ask (needed when stdin is not a terminal)",
    )
    delete.add_argument(
        "--allow-tombstones",
        action="store_true",
        help="allow erasing a tombstones.<scope> session: every id its tombstones revoke "
        "becomes visible again in every read (refused without this flag)",
    )

    from .mcp import add_mcp_arguments  # argparse only: the SDK is imported on use

    add_mcp_arguments(
        add(
            "mcp",
            "serve the store's memory to MCP clients (stdio; --http PORT for HTTP on "
            "127.0.0.1); read-only unless --allow-write",
            store,
            redact,
        )
    )

    from .inspect import add_inspect_arguments

    add_inspect_arguments(
        add(
            "inspect",
            "serve a local read-only page of the store's sessions, memory, sources and "
            "branches (127.0.0.1; needs prism-om[inspect])",
            store,
            redact,
        )
    )

    evaluate = add(
        "eval",
        "measure memory on a LoCoMo or LongMemEval file: evidence cited, answers kept, "
        "tokens, drops per speaker; QA accuracy with --base-url/--model",
        as_json,
    )
    evaluate.add_argument(
        "file",
        metavar="FILE",
        nargs="+",
        help="benchmark files (JSON: one conversation or a list, as published) or directories",
    )
    evaluate.add_argument(
        "--format", choices=("locomo", "longmemeval", "auto"), default="auto", help="default: auto"
    )
    evaluate.add_argument(
        "--db", metavar="URL", help="store to import into (default: a throwaway in-memory one)"
    )
    evaluate.add_argument("--plot", metavar="PATH", help="write a bar chart (needs matplotlib)")
    evaluate.add_argument(
        "--pool-ratio",
        type=float,
        metavar="R",
        help="cap the observation pool at R times each transcript's tokens (default: the "
        "settings' 20000), so the dropper runs on short conversations too",
    )
    evaluate.add_argument(
        "--observe",
        choices=("per-message", "per-session", "once"),
        default="per-message",
        help="what one call of the attached agent appends: each message (default), each "
        "session, or the whole import; memory flushes after it at the thresholds",
    )
    evaluate.add_argument(
        "--force",
        action="store_true",
        help="force every flush (ignore the thresholds): not what an attached agent does",
    )
    evaluate.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a memory setting, e.g. observation.messageTokens=2000 (repeatable)",
    )
    evaluate.add_argument(
        "--category",
        dest="categories",
        action="append",
        default=[],
        metavar="NAME",
        help="score only this question category (a name, or LoCoMo's number; repeatable)",
    )
    evaluate.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint")
    evaluate.add_argument("--model", metavar="NAME", help="model for memory, answers and judge")
    evaluate.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable holding the API key (default: OPENAI_API_KEY)",
    )

    # Revocation outside the API: the read commands withhold what the tombstones revoke.
    for name in TOMBSTONE_COMMANDS:
        add_tombstone_scope(sub.choices[name])
    return parser


def _version() -> str:
    """The installed distribution's version (``pip install`` put it in the metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prism-om")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _exit_code(exc: BaseException) -> int:
    if isinstance(exc, CliUsageError | InvalidInputError | StoreRuleError):
        return EXIT_USAGE
    return EXIT_FAILURE


def _describe(exc: BaseException) -> str:
    if isinstance(exc, PrismMemoryError):  # CliUsageError and WorkerRunFailed included
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}"
    if isinstance(exc, ImportError):
        return str(exc)
    name = type(exc).__name__
    return f"unexpected {name}: {exc} (rerun with --debug for the traceback)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``prism-om`` console script; returns the exit code."""
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        env_secrets = cli_secrets(argparse.Namespace())
    except CliUsageError as exc:  # PRISM_SECRETS is read before anything can catch it
        return _usage_error(exc)
    # A usage error quotes the command line: the passwords of its URLs are redacted
    # whole, spaces and all, where a line's own URL rule would see only a piece.
    with redacting_stderr([*env_secrets, *_passwords_in(given)]):
        args = build_parser().parse_args(given)
    handler: Handler = args.handler
    from .output import set_width

    set_width(getattr(args, "width", None))  # per call: main may run many times in a process
    # Every line on stderr, error lines and tracebacks included, is redacted: an error can
    # quote an entry's field, and a damaged field can hold a secret.
    with redacting_stderr(cli_secrets(args)), warning_lines():
        return _run(handler, args)


def _usage_error(exc: CliUsageError) -> int:
    """The one error line of a usage error met before a command runs, and its exit code."""
    sys.stderr.write(f"prism-om: error: {exc}\n")
    return EXIT_USAGE


def _passwords_in(argv: Sequence[str]) -> list[str]:
    """The URL passwords of a command line's arguments (``--db URL`` or ``--db=URL``)."""
    found: list[str] = []
    for item in argv:
        value = item.split("=", 1)[1] if item.startswith("--") and "=" in item else item
        found.extend(url_passwords(value))
    return found


def _run(handler: Handler, args: argparse.Namespace) -> int:
    try:
        asyncio.run(handler(args))
    except KeyboardInterrupt:
        sys.stderr.write("prism-om: interrupted\n")
        return 130
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        sys.stdout.flush()
        from .output import printable  # a message may quote untrusted text

        sys.stderr.write(f"prism-om: error: {printable(' '.join(_describe(exc).split()))}\n")
        return _exit_code(exc)
    return EXIT_OK
