"""Issue 16 figures: ways to turn stored entry rows back into ``SessionEntry`` objects.

Usage: python bench/adhoc/row_parse.py [--entries N] [--rounds R]

On the rows of the benchmark transcript (N entries, default 10,000), side by side in one
process, each way timed once per round in turn (so machine load hits them alike), the
median of R rounds (default 7; the cyclic collector paused, as the store does), printed
with its ratio to ``json.loads`` of the payloads:

- schema 3 rows (whole wire JSON in body): ``json.loads`` of each body; the path before
  schema 4 (``SessionEntry.model_validate_json`` per row); one
  ``TypeAdapter(list[SessionEntry]).validate_json`` over the joined bodies;
- schema 4 rows (envelope columns + payload body): ``json.loads`` of each payload (the
  floor and about what ``SQLiteSession.get_items`` parses); ``model_construct`` from the
  columns with the message validated from its JSON; the store's path
  (``stores._rows.entries_from_rows``: one pydantic-core parse of the joined message
  payloads without the Python after-validators, the entry set from the columns).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pydantic import TypeAdapter

from bench.data import build_dataset
from prism_om._gc import collector_paused
from prism_om.entries import Message, SessionEntry
from prism_om.stores._rows import entries_from_rows, payload_json
from prism_om.stores._schema import SCHEMA_VERSION


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    entries = build_dataset(args.entries).entries
    v3 = [e.to_json().encode() for e in entries]
    v4 = [
        (e.id, e.session_id, e.parent_id, e.kind, e.timestamp, payload_json(e).encode())
        for e in entries
    ]
    whole = TypeAdapter(list[SessionEntry])

    def construct() -> list[SessionEntry]:
        out = []
        for entry_id, sid, parent, kind, ts, body in v4:
            fields: dict[str, Any] = {
                "id": entry_id,
                "session_id": sid,
                "parent_id": parent,
                "kind": kind,
                "timestamp": ts,
            }
            if kind == "message":
                fields["message"] = Message.model_validate_json(body)
            else:
                fields["data"] = json.loads(body)
            out.append(SessionEntry.model_construct(**fields))
        return out

    ways: dict[str, Callable[[], object]] = {
        "v3 rows: json.loads of each body": lambda: [json.loads(b) for b in v3],
        "v3 rows: model_validate_json per row (before)": lambda: [
            SessionEntry.model_validate_json(b) for b in v3
        ],
        "v3 rows: TypeAdapter(list).validate_json joined": lambda: whole.validate_json(
            b"[" + b",".join(v3) + b"]"
        ),
        "v4 rows: json.loads of each payload (floor)": lambda: [json.loads(r[5]) for r in v4],
        "v4 rows: model_construct from columns": construct,
        "v4 rows: entries_from_rows (the store's path)": lambda: entries_from_rows(
            v4, SCHEMA_VERSION
        ),
    }
    assert entries_from_rows(v4, SCHEMA_VERSION) == entries
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, way in ways.items():
            # The store parses with the cyclic collector paused (prism_om._gc); so do these.
            with collector_paused():
                start = time.perf_counter()
                way()
                samples[name].append(time.perf_counter() - start)
    floor = statistics.median(samples["v4 rows: json.loads of each payload (floor)"])
    print(
        f"{args.entries:,} entries, median of {args.rounds} rounds, load {os.getloadavg()[0]:.1f}"
    )
    for name, taken in samples.items():
        median = statistics.median(taken)
        print(f"  {name:50s} {median * 1e3:8.2f} ms  {median / floor:5.2f}x floor")


if __name__ == "__main__":
    main()
