"""Subcommands that write memory: ``observe`` (one runtime flush) and ``compact``."""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from typing import Any

from rich.text import Text

from ..core.redaction import Redactor
from ..debug import MEMORY_APPENDED
from ..entries import SessionEntry
from ..errors import WorkerError
from ..observational_memory import create_observational_memory_compaction_strategy
from ..providers.base import Provider
from ..reports.flush_report import flush_json
from ..session import Session
from ..tokens import get_estimator
from ..workers import FlushResult, OfflineMemoryProvider
from ..workers.one_model import one_model_runtime
from .common import CliUsageError, open_cli_store, require_session
from .output import console, error_console, heading, print_json, table
from .reading import print_observations, print_reflections
from .redaction import cli_redactor
from .tombstones import cli_invalidated_ids

__all__ = [
    "cmd_compact",
    "cmd_observe",
    "compaction_figures",
    "compat_provider",
    "nothing_recorded_reason",
    "print_flush",
]

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"


class WorkerRunFailed(WorkerError):
    """A flush whose worker failed (exit code 1); what it did record is printed first."""


@asynccontextmanager
async def _worker_provider(args: argparse.Namespace) -> AsyncIterator[tuple[Provider, str]]:
    if args.provider == "offline":
        if args.base_url or args.model:
            raise CliUsageError("--base-url and --model go with --provider openai")
        yield OfflineMemoryProvider(), "offline"
        return
    if not args.base_url or not args.model:
        raise CliUsageError("--provider openai needs --base-url URL and --model NAME")
    async with compat_provider(args.base_url, args.model, args.api_key_env) as provider:
        yield provider, args.model


@asynccontextmanager
async def compat_provider(base_url: str, model: str, env_name: str) -> AsyncIterator[Provider]:
    """The OpenAI-compatible provider the CLI's ``--base-url``/``--model`` options name."""
    from ..providers.openai_compat import OpenAICompatibleProvider

    async def resolve_key(provider_id: str) -> str | None:
        # The one place a credential is read: the variable the user named (or the default).
        return os.environ.get(env_name) or None

    if not os.environ.get(env_name):
        error_console().print(
            f"prism-om: note: ${env_name} is not set; requests carry no API key "
            "(fine for a local server)"
        )
    provider = OpenAICompatibleProvider(base_url, model, credential_resolver=resolve_key)
    async with provider:
        yield provider


def _spinner(
    enabled: bool,
) -> tuple[AbstractContextManager[Any], Callable[[str, dict[str, Any]], None]]:
    """A status line on stderr (terminals only) fed by the runtime's debug events."""
    err = error_console()
    if not enabled or not err.is_terminal:
        return nullcontext(), lambda _event, _data: None
    status = err.status("observing…")
    appended = {"records": 0}

    def sink(event: str, data: dict[str, Any]) -> None:
        if event == MEMORY_APPENDED:
            appended["records"] += 1
            status.update(f"{data.get('type', 'record')}: {appended['records']} record(s) so far")
        elif event.startswith("om.worker"):
            status.update(f"{data.get('worker', 'worker')}: {event.rsplit('.', 1)[-1]}")

    return status, sink


async def print_flush(
    result: FlushResult, session: Session, secrets: Redactor | None = None
) -> None:
    """The outcome of a flush: each worker, then what was recorded."""
    console().print(
        table(
            ["worker", "status", "reason", ("runs", {"justify": "right"}), "ids"],
            [
                (
                    o.worker,
                    o.status,
                    o.reason or "",
                    o.runs,
                    str(len(o.memory_ids)) if o.memory_ids else "",
                )
                for o in result.outcomes
            ],
        )
    )
    ledger = await session.store.ledger(session.id)
    new_obs = set(result.observation_ids)
    new_refl = set(result.reflection_ids)
    observations = [r for r in ledger.observations if r.id in new_obs]
    reflections = [r for r in ledger.reflections if r.id in new_refl]
    if observations:
        heading(f"observations recorded ({len(observations)})")
        print_observations(observations, limit=20, secrets=secrets)
    if reflections:
        heading(f"reflections recorded ({len(reflections)})")
        print_reflections(reflections, text_limit=240, secrets=secrets)
    if result.dropped_observation_ids:
        console().print(f"dropped {len(result.dropped_observation_ids)} observation(s)")
    if not observations and not reflections and result.status == "completed":
        console().print(Text(f"nothing recorded: {nothing_recorded_reason(result)}", "dim"))


_WHY_NOTHING = {
    ("observer", "nothing_to_observe"): "every message is already observed",
    ("observer", "below_threshold"): (
        "the unobserved messages are below observation.messageTokens "
        "(use --force to observe them now)"
    ),
    ("reflector", "nothing_to_reflect"): "no observation awaits reflection",
    ("reflector", "below_threshold"): (
        "the unreflected observations are below reflection.observationTokens "
        "(use --force to reflect on them now)"
    ),
}


def nothing_recorded_reason(result: FlushResult) -> str:
    """Why a completed flush recorded nothing, per worker; ``--force`` only where it helps."""
    reasons: list[str] = []
    for worker in ("observer", "reflector"):
        outcome = result.outcome(worker)
        if outcome is None:
            continue
        why = _WHY_NOTHING.get((worker, outcome.reason or ""))
        if why is None and outcome.status == "ran":
            why = f"the {worker} ran and found nothing worth recording"
        elif why is None:
            why = f"the {worker} was skipped ({outcome.reason})"
        reasons.append(why)
    return "; ".join(dict.fromkeys(reasons)) or "no worker ran"


_SKIP_FAILING_FLUSHES = 64
"""Flushes ``observe --skip-failing`` adds at most: enough to halve a chunk to one message."""


async def cmd_observe(args: argparse.Namespace) -> None:
    async with (
        open_cli_store(args.db, write=True) as store,
        _worker_provider(args) as (provider, model),
    ):
        await require_session(store, args.session)
        session = Session(store, args.session)
        red = cli_redactor(args)
        spinner, sink = _spinner(not args.json)
        runtime = one_model_runtime(
            session,
            provider,
            model,
            settings={"debug_log": True},  # the spinner follows trace events
            secrets=red.secrets,
            debug=sink,
            invalidated_ids=await cli_invalidated_ids(store, args),
        )
        with spinner:
            result = await runtime.flush(force=args.force)
            # The runtime splits a chunk only after it failed several flushes in a row; one
            # CLI call is one runtime, so --skip-failing gives it those flushes here.
            for _ in range(_SKIP_FAILING_FLUSHES if args.skip_failing else 0):
                observer = result.outcome("observer")
                if observer is None or observer.status != "failed":
                    break
                result = await runtime.flush(force=args.force)
        for warning in result.warnings:
            error_console().print(f"prism-om: warning: {warning}", soft_wrap=True)
        if args.json:
            print_json(flush_json(result))
        else:
            await print_flush(result, session, red)
    if result.status == "failed":
        raise WorkerRunFailed(
            f"a memory worker failed: {result.error}", session_id=session.id, url=store.url
        )


def compaction_figures(entry: SessionEntry, branch_tokens: int) -> dict[str, Any]:
    """What a compaction entry holds, with sizes, for printing and ``--json``."""
    data = entry.data or {}
    memory = data.get("memory") or {}
    est = get_estimator()
    return {
        "entryId": entry.id,
        "trigger": data.get("trigger"),
        "throughEntryId": data.get("throughEntryId"),
        "keepEntryIds": list(data.get("keepEntryIds") or ()),
        "summaryTokens": est.count(entry.summary or ""),
        "summaryChars": len(entry.summary or ""),
        "foldedObservations": len(memory.get("observations") or ()),
        "foldedReflections": len(memory.get("reflections") or ()),
        "trimmedObservationIds": list(memory.get("droppedObservationIds") or ()),
        "branchTokens": branch_tokens,
    }


async def _refuse_empty_summary(
    store: Any,
    session: Session,
    branch: list[SessionEntry],
    compaction: SessionEntry,
    invalid: frozenset[str],
    *,
    force: bool,
) -> None:
    """A compaction with nothing to render changes nothing worth an entry: say so.

    Every message memory has not covered is kept verbatim (``core.request_window``), so
    an empty summary folds away only messages that are covered, revoked or kept: a
    session never observed would be kept whole, a compaction that only restates it.
    """
    keep = set((compaction.data or {}).get("keepEntryIds") or ())
    messages = [e for e in branch if e.kind == "message" and e.id not in invalid]
    folded = sum(1 for e in messages if e.id not in keep)
    if not messages:
        return
    ledger = await store.live_ledger(session.id)
    if ledger.observation_coverage is None and not ledger.observations:
        why = f"session {session.id!r} was never observed"
        fix = f"run 'prism-om observe --session {session.id}' first"
    elif folded:
        why = f"session {session.id!r} has no active memory to render"
        fix = "observe it first"
    else:
        return
    problem = (
        f"{why}: the compaction's summary would be empty, keeping {len(messages) - folded} "
        f"message(s) verbatim and folding {folded} into it"
    )
    if not force:
        raise CliUsageError(
            f"{problem}; {fix}, or pass --force to compact anyway",
            session_id=session.id,
            url=session.store.url,
        )
    error_console().print(f"prism-om: warning: {problem} (--force given)")


def _redacted_ids(figures: dict[str, Any], red: Redactor) -> dict[str, Any]:
    """``figures`` with the ids of messages redacted: the host's text, as a message is
    (the compaction's own id is the one this command drew)."""
    if not red:
        return figures
    return {
        **figures,
        "throughEntryId": red.text(figures["throughEntryId"] or "") or None,
        "keepEntryIds": [red.text(i) for i in figures["keepEntryIds"]],
    }


def print_compaction(figures: dict[str, Any]) -> None:
    out = console()
    out.print(
        f"compaction {figures['entryId']} (trigger: {figures['trigger']}) through "
        f"{figures['throughEntryId']}"
    )
    out.print(
        f"  summary: {figures['summaryTokens']} tokens ({figures['summaryChars']} characters), "
        f"folding {figures['foldedObservations']} observation(s) and "
        f"{figures['foldedReflections']} reflection(s); "
        f"{len(figures['trimmedObservationIds'])} trimmed to fit"
    )
    out.print(
        f"  kept verbatim: {len(figures['keepEntryIds'])} recent message(s); the raw branch "
        f"behind it: {figures['branchTokens']} tokens"
    )


async def cmd_compact(args: argparse.Namespace) -> None:
    async with open_cli_store(args.db, write=True) as store:
        await require_session(store, args.session)
        session = Session(store, args.session)
        invalid = await cli_invalidated_ids(store, args)
        strategy = create_observational_memory_compaction_strategy(
            keep_recent_entries=args.recent_messages,
            invalidated_ids=invalid,
            secrets=cli_redactor(args).secrets,
        )
        branch = await session.entries()
        compaction = strategy.compact(branch, session_id=session.id, trigger="manual")
        if not (compaction.summary or "").strip():
            await _refuse_empty_summary(
                store, session, branch, compaction, invalid, force=args.force
            )
        entry = await session.append(compaction)
        figures = compaction_figures(entry, await store.branch_tokens(session.id, branch[-1].id))
        figures = _redacted_ids(figures, cli_redactor(args))
    if args.json:
        print_json(figures)
    else:
        print_compaction(figures)
