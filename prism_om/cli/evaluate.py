"""``prism-om eval``: run LoCoMo or LongMemEval files through observational memory, as an
attached agent would (``--force`` to force every flush instead), and print what the next
request would hold beside the memory alone and the transcript."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._extras import install_hint
from ..providers.base import Provider
from .common import CliUsageError, store_url
from .memory import compat_provider
from .output import console, error_console, print_json

__all__ = ["cmd_eval", "parse_settings"]


@asynccontextmanager
async def _model(args: argparse.Namespace) -> AsyncIterator[Provider | None]:
    if not args.base_url and not args.model:
        yield None
        return
    if not args.base_url or not args.model:
        raise CliUsageError("--base-url and --model go together (a model for memory and QA)")
    async with compat_provider(args.base_url, args.model, args.api_key_env) as provider:
        yield provider


def _progress(enabled: bool) -> tuple[AbstractContextManager[Any], Callable[[int, int, str], None]]:
    """A progress bar on stderr (terminals only), fed by the harness's steps."""
    err = error_console()
    if not enabled or not err.is_terminal:
        return nullcontext(), lambda _done, _total, _label: None
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    task = bar.add_task("evaluating", total=None)

    def update(done: int, total: int, label: str) -> None:
        bar.update(task, completed=done, total=total, description=label[:40])

    return bar, update


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """``["observation.messageTokens=2000"]`` as a settings mapping; a value is read as
    JSON when it parses (numbers, booleans), else kept as text."""
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        path = key.strip().split(".")
        if not sep or not all(path):
            raise CliUsageError(
                f"--set takes KEY=VALUE, e.g. observation.messageTokens=2000 (got {pair!r})"
            )
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        group = settings
        for part in path[:-1]:
            nested = group.setdefault(part, {})
            if not isinstance(nested, dict):
                raise CliUsageError(f"--set {pair!r}: {part!r} is already set to a value")
            group = nested
        group[path[-1]] = value
    return settings


async def cmd_eval(args: argparse.Namespace) -> None:
    from ..eval import plot_summary, run_eval, summary_table

    if args.pool_ratio is not None and not 0 < args.pool_ratio <= 100:
        raise CliUsageError(f"--pool-ratio must be above 0 (got {args.pool_ratio})")
    settings = parse_settings(args.settings)
    db = store_url(args.db) if args.db else "memory:"
    async with _model(args) as provider:
        bar, update = _progress(not args.json)
        with bar:
            summary = await run_eval(
                args.file,
                format=args.format,
                db=db,
                provider=provider,
                model=args.model,
                pool_ratio=args.pool_ratio,
                observe=args.observe,
                force=args.force,
                settings=settings,
                categories=args.categories,
                progress=update,
            )
    if args.plot:
        if plot_summary(summary, args.plot):
            error_console().print(f"prism-om: plot written to {args.plot}")
        else:
            error_console().print(
                f"prism-om: note: no plot: matplotlib is not installed ({install_hint('eval')})"
            )
    if args.json:
        print_json(summary)
        return
    out = console()
    out.print(summary["observedAs"])
    for table in summary_table(summary):
        out.print(table)
    failures = [f for c in summary["conversations"] for f in c["failures"]]
    for failure in failures[:10]:
        error_console().print(f"prism-om: warning: {failure}")
