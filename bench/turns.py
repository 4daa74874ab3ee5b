"""``python -m bench.turns``: what one turn costs, side by side, as sessions grow.

Every system (``bench.turn_systems``) plays the same seeded dialog
(``prism_om.testing.dialog``: user messages of 60 to 120 words, each with a unique fact,
replies of the same length) in one process. At each checkpoint (``--at``, turns played so
far) the systems run ``--turns`` timed turns **interleaved turn by turn**, the starting
system rotated each round, so a noisy moment hits every system alike; CPU
(``time.process_time``) and wall are taken per turn, the stand-in model's own time taken
out. Between checkpoints each system is **fast-forwarded**: the dialog's turns are
appended in bulk through the system's own write path (50 turns a batch) and prism-om's
memory is flushed after each batch (about one observer run per batch at the default
10,000 message tokens), so a 20,000-turn session holds the memory it would have had;
nothing of the fast-forward is timed.

Ratios are paired per round: a system's turn over the reference's turn of the same round
(``sqlite-session:20``), median over the rounds where the system ran no memory worker (an
*ordinary* turn). The PostgreSQL server's own CPU is not in ``process_time``: its wall is.

Flat, side by side: windows taken minutes apart compare a machine with itself at two
moments (a shared machine's speed drifts by more than the 10% the target allows), so
after the last checkpoint each ``agent:*`` system plays ``--turns`` more turns interleaved
with a second instance of itself fast-forwarded to ``FLAT_BASE`` turns (its own file or
schema), and the flat figure is the median over rounds of late / early CPU, ordinary
turns of both only.

    python -m bench.turns                              # checkpoints 0, 1k, 5k, 20k
    python -m bench.turns --at 0,1000 --turns 30 --systems agent:sqlite,sqlite-session:20
    python -m bench.turns --docs docs                  # also rewrite docs/turns.md
    python -m bench.turns --rss                        # peak RSS, one child process per system
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from prism_om.testing.dialog import DialogTurn, dialog_turns

from .turn_systems import SYSTEM_NAMES, System, TurnCost, make_system

REFERENCE = "sqlite-session:20"
DEFAULT_AT = (0, 1000, 5000, 20000)
# The early instance of the side-by-side flat window starts here.
FLAT_BASE = 1000


@dataclass
class Window:
    """One checkpoint's timed turns of one system."""

    at: int
    costs: list[TurnCost] = field(default_factory=list)
    prompt_tokens: int = 0
    store_bytes: int | None = None

    def ordinary(self) -> list[TurnCost]:
        return [c for c in self.costs if not c.worker]


@dataclass
class Run:
    systems: list[str]
    at: list[int]
    turns: int
    windows: dict[str, list[Window]] = field(default_factory=dict)
    # Per agent system, the side-by-side flat window: (late turn, early turn) per round.
    flat: dict[str, list[tuple[TurnCost, TurnCost]]] = field(default_factory=dict)
    load: str = ""
    seconds: float = 0.0


def _ms(values: Sequence[float]) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


def _paired(run: Run, system: str, index: int, attr: str, reference: str = REFERENCE) -> float:
    """Median over rounds of system / reference, ordinary turns of the system only."""
    if reference not in run.windows:
        return float("nan")
    mine, ref = run.windows[system][index].costs, run.windows[reference][index].costs
    ratios = [
        getattr(a, attr) / getattr(b, attr)
        for a, b in zip(mine, ref, strict=True)
        if not a.worker and getattr(b, attr) > 0
    ]
    return statistics.median(ratios) if ratios else float("nan")


def _paired_part(run: Run, index: int, name: str) -> float:
    """Median over rounds of prism-session's / sqlite-session's ``name`` part, rounds in
    which both turns were ordinary."""
    mine = run.windows["prism-session"][index].costs
    ref = run.windows["sqlite-session"][index].costs
    ratios = [
        a.parts[name] / b.parts[name]
        for a, b in zip(mine, ref, strict=True)
        if not (a.worker or b.worker)
        and a.parts
        and b.parts
        and name in a.parts
        and b.parts.get(name, 0) > 0
    ]
    return statistics.median(ratios) if ratios else float("nan")


def _part(window: Window, name: str) -> list[float]:
    return [c.parts[name] for c in window.ordinary() if c.parts and name in c.parts]


async def _measure(run: Run, dialog: list[DialogTurn], workdir: str, pg_url: str | None) -> None:
    systems: list[System] = [make_system(name) for name in run.systems]
    for system in systems:
        await system.open(workdir, pg_url)
        run.windows[system.name] = []
    played = 0
    try:
        for at in run.at:
            if at > played:
                for system in systems:
                    print(f"  fast-forward {system.name} to {at:,} turns", file=sys.stderr)
                    await system.fast_forward(dialog[played:at])
                played = at
            windows = {s.name: Window(at) for s in systems}
            gc.collect()
            for r in range(run.turns):
                shift = r % len(systems)
                for system in systems[shift:] + systems[:shift]:
                    windows[system.name].costs.append(await system.turn(dialog[played + r]))
            played += run.turns
            for system in systems:
                window = windows[system.name]
                window.prompt_tokens = await system.prompt_tokens()
                window.store_bytes = system.store_bytes()
                run.windows[system.name].append(window)
            print(f"  window at {at:,} done", file=sys.stderr)
        if run.at[-1] > FLAT_BASE:
            for system in systems:
                if system.name.startswith("agent:"):
                    await _flat_window(run, system, dialog, played, workdir, pg_url)
    finally:
        for system in systems:
            await system.close()


async def _flat_window(
    run: Run, late: System, dialog: list[DialogTurn], played: int, workdir: str, pg_url: str | None
) -> None:
    """``late`` (at the last checkpoint) and a fresh instance at ``FLAT_BASE`` turns, turn
    by turn, the first of each round alternating."""
    early = make_system(late.name)
    where = os.path.join(workdir, f"flat-{late.name.replace(':', '-')}")
    os.makedirs(where)
    url = None
    if pg_url is not None:
        from prism_om.testing.postgres_cluster import with_fresh_schema

        url = with_fresh_schema(pg_url, f"turns_flat_{os.getpid()}")
    await early.open(where, url)
    try:
        print(f"  fast-forward a second {late.name} to {FLAT_BASE:,} turns", file=sys.stderr)
        await early.fast_forward(dialog[:FLAT_BASE])
        gc.collect()
        pairs: list[tuple[TurnCost, TurnCost]] = []
        for r in range(run.turns):
            if r % 2:
                e = await early.turn(dialog[FLAT_BASE + r])
                lt = await late.turn(dialog[played + r])
            else:
                lt = await late.turn(dialog[played + r])
                e = await early.turn(dialog[FLAT_BASE + r])
            pairs.append((lt, e))
        run.flat[late.name] = pairs
    finally:
        await early.close()


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("met" if ok else "missed")


def report(run: Run) -> str:
    """The run as markdown: per checkpoint a table, then the targets' verdicts."""
    lines = [
        "# Turn benchmark (`python -m bench.turns`)",
        "",
        f"{run.turns} timed turns per system per checkpoint, interleaved turn by turn (the "
        "starting system rotated each round), after a fast-forward to the checkpoint (bulk "
        "appends of 50 turns, memory flushed after each). CPU is `time.process_time()` of "
        "this process (a PostgreSQL server's own CPU is not in it), the stand-in model's share "
        "removed; *ordinary* turns are those in which no memory worker ran. Ratios are "
        f"paired per round against `{REFERENCE}` (median over ordinary rounds). "
        f"Machine load: {run.load}. Took {run.seconds / 60:.1f} min.",
        "",
    ]
    for index, at in enumerate(run.at):
        lines += [
            f"## At {at:,} turns",
            "",
            "| system | CPU ms (median, ordinary) | wall ms | CPU x ref | wall x ref | "
            "mean CPU ms (all turns) | worker turns | prompt tokens | store bytes |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name in run.systems:
            w = run.windows[name][index]
            ordinary = w.ordinary()
            mean = statistics.fmean(c.cpu for c in w.costs) * 1000 if w.costs else 0.0
            size = "—" if w.store_bytes is None else f"{w.store_bytes:,}"
            lines.append(
                f"| {name} | {_ms([c.cpu for c in ordinary]):.2f} | "
                f"{_ms([c.wall for c in ordinary]):.2f} | "
                f"{_paired(run, name, index, 'cpu'):.2f} | "
                f"{_paired(run, name, index, 'wall'):.2f} | "
                f"{mean:.2f} | {len(w.costs) - len(ordinary)} | {w.prompt_tokens:,} | {size} |"
            )
        lines.append("")
    lines += _targets(run)
    return "\n".join(lines) + "\n"


def _targets(run: Run) -> list[str]:
    out = ["## Targets", "", "| target | figures | verdict |", "|---|---|---|"]
    have = set(run.systems)
    if {"agent:sqlite", REFERENCE} <= have:
        ratios = [_paired(run, "agent:sqlite", i, "cpu") for i in range(len(run.at))]
        shown = ", ".join(f"{at:,}: {r:.2f}x" for at, r in zip(run.at, ratios, strict=True))
        out.append(
            f"| agent:sqlite ordinary turn ≤ 5x the CPU of `{REFERENCE}` at every length | "
            f"{shown} | {_verdict(all(r <= 5 for r in ratios))} |"
        )
    if {"agent:sqlite", "sqlite-session"} <= have:
        pairs = [
            (at, _paired(run, "agent:sqlite", i, "cpu", "sqlite-session"))
            for i, at in enumerate(run.at)
            if at >= 1000
        ]
        if pairs:
            shown = ", ".join(f"{at:,}: {r:.2f}x" for at, r in pairs)
            out.append(
                "| agent:sqlite faster than `sqlite-session` (whole history) from 1,000 turns | "
                f"{shown} | {_verdict(all(r < 1 for _, r in pairs))} |"
            )
    last_at = run.at[-1]
    for name in run.systems:
        if not name.startswith("agent:") or last_at <= FLAT_BASE:
            continue
        apart = ""
        if FLAT_BASE in run.at:
            a = _ms([c.cpu for c in run.windows[name][run.at.index(FLAT_BASE)].ordinary()])
            b = _ms([c.cpu for c in run.windows[name][-1].ordinary()])
            apart = f"; windows apart: {a:.2f} → {b:.2f} ms ({b / a:.2f}x)"
        rounds = [(lt, e) for lt, e in run.flat.get(name, ()) if not (lt.worker or e.worker)]
        side = statistics.median(lt.cpu / e.cpu for lt, e in rounds) if rounds else float("nan")
        out.append(
            f"| flat: {name} median ordinary turn at {last_at:,} ≤ 1.1x at {FLAT_BASE:,} | "
            f"side by side ({len(rounds)} rounds): {side:.2f}x{apart} | "
            f"{_verdict(side <= 1.1 if rounds else None)} |"
        )
    if {"prism-session", "sqlite-session"} <= have:
        for part, limit in (("get_items", 1.2), ("add_items", 1.5)):
            figures = []
            ok = True
            for i, at in enumerate(run.at):
                if at < 5000:
                    continue
                mine = _ms(_part(run.windows["prism-session"][i], part))
                ref = _ms(_part(run.windows["sqlite-session"][i], part))
                # Paired per round, as every ratio here: the same round's calls.
                ratio = _paired_part(run, i, part)
                figures.append(f"{at:,}: {mine:.2f} / {ref:.2f} ms (medians), {ratio:.2f}x paired")
                ok = ok and ratio <= limit
            if figures:
                out.append(
                    f"| `PrismSession.{part}()` without memory ≤ {limit}x `SQLiteSession` "
                    f"at 5k and 20k | {'; '.join(figures)} | {_verdict(ok)} |"
                )
        i = len(run.at) - 1
        mine_b = run.windows["prism-session"][i].store_bytes
        ref_b = run.windows["sqlite-session"][i].store_bytes
        if mine_b and ref_b:
            out.append(
                f"| store bytes ≤ 2x `SQLiteSession`'s (at {run.at[i]:,}) | "
                f"{mine_b:,} / {ref_b:,} ({mine_b / ref_b:.2f}x) | "
                f"{_verdict(mine_b <= 2 * ref_b)} |"
            )
    return [*out, ""]


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def _rss(systems: Sequence[str], at: int, turns: int) -> list[str]:
    """Peak RSS of each system alone, in a child process that plays ``at`` + ``turns``."""
    out = ["## Peak RSS", "", "| system | turns | peak RSS MB |", "|---|---:|---:|"]
    for name in systems:
        done = subprocess.run(
            [sys.executable, "-m", "bench.turns", "--child", name, "--at", str(at)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            out.append(f"| {name} | {at:,} | failed: {done.stderr.strip()[-200:]} |")
            continue
        peak = json.loads(done.stdout.strip().splitlines()[-1])["peak"]
        out.append(f"| {name} | {at + turns:,} | {peak / 2**20:.0f} |")
    return [*out, ""]


def _peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


async def _child(name: str, at: int, turns: int) -> None:
    dialog = list(dialog_turns(at + turns))
    with ExitStack() as stack:
        pg = _pg(stack, [name])
        with tempfile.TemporaryDirectory() as workdir:
            system = make_system(name)
            await system.open(workdir, pg)
            await system.fast_forward(dialog[:at])
            for t in dialog[at:]:
                await system.turn(t)
            await system.close()
    print(json.dumps({"peak": _peak_rss()}))


def _pg(stack: ExitStack, systems: Sequence[str]) -> str | None:
    if "agent:postgres" not in systems:
        return None
    from prism_om.testing.postgres_cluster import with_fresh_schema

    from .pg import postgres_server

    return with_fresh_schema(stack.enter_context(postgres_server()), f"turns_{os.getpid()}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.turns", description=__doc__)
    parser.add_argument("--at", default=",".join(str(a) for a in DEFAULT_AT))
    parser.add_argument("--turns", type=int, default=40, help="timed turns per checkpoint")
    parser.add_argument("--systems", default=",".join(SYSTEM_NAMES))
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--docs", default=None, help="also write DOCS/turns.md")
    parser.add_argument("--rss", action="store_true", help="peak RSS per system, alone")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    at = sorted({int(a) for a in args.at.split(",") if a.strip()})
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.child:
        asyncio.run(_child(args.child, at[-1], args.turns))
        return 0
    if args.rss:
        print("\n".join(_rss(systems, at[-1], args.turns)))
        return 0
    run = Run(systems, at, args.turns, load=_load())
    # Every checkpoint's window, then the flat window's.
    dialog = list(dialog_turns(at[-1] + args.turns * (len(at) + 1)))
    started = time.perf_counter()
    with ExitStack() as stack:
        pg = _pg(stack, systems)
        with tempfile.TemporaryDirectory() as workdir:
            asyncio.run(_measure(run, dialog, workdir, pg))
    run.seconds = time.perf_counter() - started
    run.load = f"{run.load} at the start, {_load()} at the end"
    text = report(run)
    print(text)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "turns.md").write_text(text)
    if args.docs:
        (Path(args.docs) / "turns.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
