"""``prism-om demo``: the whole lifecycle in a store of any kind, offline, in seconds.

A recorded two-session conversation (``prism_om/data/demo_conversation.json``) is replayed
through an agent with observational memory attached. The agent's replies come from the
recording (a ``ScriptedProvider``) and the memory workers are the deterministic
``OfflineMemoryProvider``, so nothing needs a network, a model or a credential. The
thresholds are small, so a conversation of a few dozen turns records observations and a
reflection and triggers a compaction, as a long real session would.

The store is the user's (``prism-om-demo.db`` is every command's default ``--db``), so the
demo removes only what it made. The replay runs in memory first. A session of the store
named like one of the demo's is the demo's when its transcript (every entry but memory
records) is the replay's, ids aside; that one is replaced. Any other session is left as
it was: one with another name refuses the run (exit 2) unless ``--force``, which adds the
demo's sessions beside it, and one named like the demo's refuses it even then.
"""

from __future__ import annotations

import argparse
import json
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any, Final

from rich.text import Text

from ..attach import AttachedObservationalMemory, create_observational_memory
from ..core.ledger import RecordedObservation
from ..core.redaction import hide_url_password
from ..debug import MEMORY_APPENDED
from ..entries import SessionEntry
from ..errors import CopyVerificationError, StoreError, StoreNotFoundError
from ..host import Agent, AgentTool
from ..observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from ..providers import ScriptedProvider
from ..session import Session
from ..stores import SessionStore, open_store
from ..stores.base import ANY_MEMORY_HEAD, AnyMemoryHead
from ..stores.memory import MemoryStore
from ..tokens import get_estimator
from ..workers import OFFLINE_MODEL, OfflineMemoryProvider
from .common import CliUsageError, store_url
from .copy import copy_sessions, verify_copy
from .memory import compaction_figures, print_compaction
from .output import clip, console, heading, table
from .reading import print_observations, print_page, print_recall, print_reflections

__all__ = ["DEMO_SETTINGS", "cmd_demo", "load_demo_conversation", "run_demo"]

DEMO_DATA = "demo_conversation.json"

# Small thresholds, so a short conversation goes through every stage of a long one.
DEMO_SETTINGS: dict[str, Any] = {
    "observation": {"message_tokens": 300},
    "reflection": {"observation_tokens": 500},
    "dropper": {"policy": "lowest-relevance"},
    "context": {
        "compact_after_tokens": 1200,
        "recent_messages": 8,
        "observations_pool_max_tokens": 500,
        "observations_pool_target_tokens": 300,
    },
}
_TURN_SPACING = timedelta(minutes=3)
_APPEND_SPACING = timedelta(seconds=20)
_SHOWN_OBSERVATIONS = 10
_BLOCK_LINES = 14


def load_demo_conversation() -> dict[str, Any]:
    """The recorded conversation shipped with the package."""
    text = resources.files("prism_om").joinpath("data", DEMO_DATA).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


class _ReplayClock:
    """Stamps entries with the recording's times, so dates in memory match the story."""

    def __init__(self, start: str) -> None:
        self.start = datetime.fromisoformat(start.replace("Z", "+00:00"))
        self.now = self.start

    def turn(self, index: int) -> None:
        self.now = max(self.now, self.start + index * _TURN_SPACING)

    def tick(self) -> str:
        stamp = self.now.astimezone(UTC).isoformat(timespec="milliseconds")
        self.now += _APPEND_SPACING
        return stamp.replace("+00:00", "Z")


class _ReplaySession(Session):
    """A session whose messages and compactions take the replay clock's time.

    Memory records keep the wall clock: the runtime checks that the store holds exactly
    the record it built, and they were in fact recorded now.
    """

    def __init__(self, store: SessionStore, session_id: str, clock: _ReplayClock) -> None:
        super().__init__(store, session_id)
        self.clock = clock

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> SessionEntry:
        if entry.kind != "custom":
            entry = entry.model_copy(update={"timestamp": self.clock.tick()})
        return await super().append(entry, expected_memory_head=expected_memory_head)


def _script(turns: list[dict[str, Any]]) -> tuple[ScriptedProvider, list[AgentTool]]:
    """The recorded replies as a scripted provider, and the recorded tool results."""
    replies: list[list[dict[str, Any]]] = []
    results: dict[str, list[Any]] = {}
    for index, turn in enumerate(turns):
        tool = turn.get("tool")
        if tool is not None:
            call = {"name": tool["name"], "arguments": tool["arguments"], "id": f"call_{index}"}
            replies.append([{"tool_call": call}])
            results.setdefault(tool["name"], []).append(tool["result"])
        replies.append([{"text": turn["assistant"]}])

    def recorded(name: str) -> AgentTool:
        async def handler(args: dict[str, Any], *, session_id: str) -> Any:
            return results[name].pop(0)

        return AgentTool.of(name, handler, description=f"recorded {name} results")

    return ScriptedProvider(replies), [recorded(name) for name in results]


@dataclass
class SessionRun:
    """What replaying one session did."""

    session_id: str
    attached: AttachedObservationalMemory
    turns: int
    records: Counter[str] = field(default_factory=Counter)


async def _replay(
    store: SessionStore, spec: dict[str, Any], system: str, records: Counter[str]
) -> SessionRun:
    memory = create_observational_memory(
        DEMO_SETTINGS,
        observation={"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL},
        reflection={"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL},
        debug=lambda event, data: records.update(
            [data["type"]] if event == MEMORY_APPENDED else []
        ),
        debug_log=True,  # the record counts come from trace events
    )
    clock = _ReplayClock(spec["start"])
    session = _ReplaySession(store, spec["id"], clock)
    provider, tools = _script(spec["turns"])
    agent = Agent(session=session, provider=provider, model="replay", system=system, tools=tools)
    attached = memory.attach(agent)
    for index, turn in enumerate(spec["turns"]):
        clock.turn(index)
        await attached.agent.run(turn["user"])
    await attached.drain()
    return SessionRun(spec["id"], attached, len(spec["turns"]), records)


def _check_file(url: str) -> None:
    """Refuse a ``sqlite:`` path that exists and is not a SQLite file: never written to."""
    if not url.startswith("sqlite:"):
        return
    path = Path(url.removeprefix("sqlite:").removeprefix("//"))
    if path.exists():
        with path.open("rb") as handle:
            header = handle.read(16)
        if path.is_dir() or (header and header != b"SQLite format 3\x00"):
            raise CliUsageError(f"{path} exists and is not a SQLite file; not writing to it")


async def _open_target(url: str) -> SessionStore:
    """The store at ``url``, made when missing; never a SQLite file that another program
    made (a non-empty one without prism-om's tables)."""
    try:
        return await open_store(url, create=False)
    except StoreNotFoundError as exc:
        if url.startswith("sqlite:") and _holds_bytes(url):
            raise CliUsageError(
                f"{url} is a SQLite file without prism-om's tables; not writing to it: "
                "pass --db NEW",
                url=url,
            ) from exc
    return await open_store(url, create=True)


def _holds_bytes(url: str) -> bool:
    path = Path(url.removeprefix("sqlite:").removeprefix("//"))
    return path.is_file() and path.stat().st_size > 0


# A replay draws new entry ids; everything else of a transcript entry it writes alike.
_DRAWN_ANEW: Final = frozenset({"id", "parentId"})


def _transcript(entries: list[SessionEntry]) -> list[dict[str, Any]]:
    """What a session says: its entries but memory records, without their drawn ids."""
    wires = (e.model_dump(by_alias=True, mode="json") for e in entries if e.kind != "custom")
    return [{k: v for k, v in wire.items() if k not in _DRAWN_ANEW} for wire in wires]


async def _own_sessions(target: SessionStore, replay: SessionStore, force: bool) -> list[str]:
    """The sessions of ``target`` that an earlier demo made, to replace; ``CliUsageError``
    for any other, unless ``force`` (never for one named like the demo's)."""
    ours = set(await replay.sessions())
    held = await target.sessions()
    others = [sid for sid in held if sid not in ours]
    mine: list[str] = []
    unlike: list[str] = []
    for sid in held:
        if sid not in ours:
            continue
        try:
            theirs = await target.list(sid)
        except StoreError:
            unlike.append(sid)  # unreadable: not the demo's to remove
            continue
        same = _transcript(theirs) == _transcript(await replay.list(sid))
        (mine if same else unlike).append(sid)
    if unlike:
        raise CliUsageError(
            f"{target.url} holds {_listed(unlike)} named like the demo's but not as the "
            "demo made it; the demo never replaces a session it did not make, --force or "
            "not: pass --db NEW for a store of its own",
            session_id=unlike[0],
            url=target.url,
        )
    if others and not force:
        raise CliUsageError(
            f"{target.url} holds {_listed(others)} the demo did not make, and it replaces "
            "only its own: pass --force to add the demo's sessions beside them, or --db NEW "
            "for a store of its own",
            session_id=others[0],
            url=target.url,
        )
    return mine


def _listed(session_ids: list[str]) -> str:
    shown = ", ".join(repr(sid) for sid in session_ids[:3])
    more = f", ... {len(session_ids)} in all" if len(session_ids) > 3 else ""
    noun = "session" if len(session_ids) == 1 else "sessions"
    return f"{len(session_ids)} {noun} ({shown}{more})"


async def _fill(store: SessionStore, replay: SessionStore, force: bool) -> None:
    """Replace the demo's earlier sessions in ``store`` with the replay's, leaving every
    other session as it was."""
    for sid in await _own_sessions(store, replay, force):
        await store.delete_session(sid)
    copies = await copy_sessions(replay, store, await replay.sessions())
    problems = await verify_copy(replay, store, copies)
    if problems:
        raise CopyVerificationError(
            f"the demo's sessions differ in {store.url} from the replay: " + "; ".join(problems),
            url=store.url,
        )


async def run_demo(db: str, *, force: bool = False) -> None:
    """Replay the recorded conversation into the store at ``db`` and print the tour.

    The demo's sessions of an earlier run are replaced; a session it did not make stays
    as it was, and refuses the run (``CliUsageError``) unless ``force``.
    """
    started = time.perf_counter()
    url = store_url(db)
    _check_file(url)
    data = load_demo_conversation()
    out = console()
    est = get_estimator()
    # Replayed in memory before the target is opened: the target is compared with what
    # the demo makes, and a replay that fails leaves it untouched.
    replay = MemoryStore()
    runs = []
    for spec in data["sessions"]:
        runs.append(await _replay(replay, spec, data["system"], Counter()))
    async with await _open_target(url) as store:
        await _fill(store, replay, force)
        elapsed = time.perf_counter() - started

        out.print(Text(f"prism-om demo: {data['title']}", style="bold"))
        out.print(
            f"{len(runs)} sessions, {sum(r.turns for r in runs)} user turns replayed through an "
            "agent with observational memory attached; offline workers (deterministic, no "
            f"network, no credentials); {elapsed:.1f} s"
        )
        out.print(f"store: {store.url}")
        rows = []
        for run in runs:
            listed = await store.list(run.session_id)
            rows.append(
                (
                    run.session_id,
                    run.turns,
                    sum(1 for e in listed if e.kind == "message"),
                    len((await store.ledger(run.session_id)).observations),
                    len((await store.ledger(run.session_id)).reflections),
                    len(run.attached.compactions),
                )
            )
        out.print(
            table(
                [
                    ("session", {"no_wrap": True}),
                    ("turns", {"justify": "right"}),
                    ("messages", {"justify": "right"}),
                    ("observations", {"justify": "right"}),
                    ("reflections", {"justify": "right"}),
                    ("compactions", {"justify": "right"}),
                ],
                rows,
            )
        )
        await _tour(store, runs[0], est_name=est.name)
    out.print()
    _next_steps(db, runs[0].session_id)


def _next_steps(db: str, first: str) -> None:
    """The commands to try next, each as it runs (a URL's password hidden)."""
    out = console()
    if store_url(db).startswith("memory:"):
        out.print(
            "memory: keeps nothing past this command: pass --db FILE to keep the demo's "
            "sessions for the commands to try next"
        )
        return
    shown = hide_url_password(db)
    where = shlex.quote(shown)
    out.print(Text("Next:", style="bold"))
    for command in (
        f"prism-om sessions --db {where}",
        f"prism-om status --session {first} --db {where}",
        f"prism-om view --session {first} --db {where} --full",
    ):
        out.print(f"  {command}")
    # The page is an optional extra; name it so a first-time user finds it.
    out.print(f"  prism-om inspect --db {where} --open   (pip install 'prism-om[inspect]')")
    if shown != db:
        out.print("  (the URL's password is shown as ***: put it back, or set PGPASSWORD)")


async def _tour(store: SessionStore, run: SessionRun, *, est_name: str) -> None:
    out = console()
    sid = run.session_id
    ledger = await store.ledger(sid)
    active = ledger.live_observations()
    heading(
        f"observations recorded in {sid}",
        f"{len(ledger.observations)} in all; the dropper retired "
        f"{len(ledger.dropped_observation_ids)} of the lowest priority to keep the pool "
        f"under {DEMO_SETTINGS['context']['observations_pool_max_tokens']} tokens; "
        f"{len(active)} active:",
    )
    print_observations(active, limit=_SHOWN_OBSERVATIONS, sources=False)
    heading(f"reflections recorded in {sid} ({len(ledger.reflections)})")
    print_reflections(ledger.reflections, text_limit=240)

    compactions = run.attached.compactions
    if compactions:
        last = compactions[-1]
        through = (last.data or {}).get("throughEntryId")
        heading("compaction", f"{len(compactions)} so far; the latest:")
        tokens = await store.branch_tokens(sid, through) if through else 0
        print_compaction(compaction_figures(last, tokens))

    heading("context the next turn would see", f"tokens by {est_name}")
    blocks = await run.attached.context_provider.blocks(run.attached.agent.session)
    raw = await store.branch_tokens(sid)
    messages = sum(1 for e in await store.entries(sid) if e.kind == "message")
    for block in blocks:
        out.print(Text(f"[{block.name}]  {block.tokens} tokens", style="bold cyan"))
        lines = block.text.splitlines()
        for line in lines[:_BLOCK_LINES]:
            out.print(Text("  " + clip(line, 110)))
        if len(lines) > _BLOCK_LINES:
            out.print(Text(f"  … {len(lines) - _BLOCK_LINES} more lines", style="dim"))
    total = sum(b.tokens for b in blocks)
    out.print(
        Text.assemble(
            ("context blocks: ", "bold"),
            f"{total} tokens, instead of the raw transcript's {raw} tokens ({messages} messages)",
            f" = {100 * total / max(raw, 1):.0f}%",
        )
    )

    chosen = _pick(ledger.observations)
    if chosen is None:
        return
    heading("recall by id", f"prism-om recall {chosen.id} --session {sid}")
    found = await recall_observational_memory(store, chosen.id, session_id=sid)
    print_recall(found)

    cursor = chosen.observation.source_entry_ids[0]
    heading("a page of raw messages", f"prism-om page --session {sid} --cursor {cursor}")
    page = await recall_observational_memory_branch_page(
        store, cursor, session_id=sid, limit=5, detail="summary"
    )
    print_page(page)


def _pick(observations: tuple[RecordedObservation, ...]) -> RecordedObservation | None:
    """An observation worth recalling: a high-priority one about the migration, if any."""
    for record in observations:
        if "0042" in record.observation.text and record.observation.priority == "high":
            return record
    high = [r for r in observations if r.observation.priority == "high"]
    chosen = high or list(observations)
    return chosen[0] if chosen else None


async def cmd_demo(args: argparse.Namespace) -> None:
    await run_demo(args.db, force=args.force)
