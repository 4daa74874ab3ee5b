"""Redaction cost on 1 MB of text, and the surrogate check an append adds per entry.

``python bench/adhoc/redaction_figures.py``: median of 5 runs each, in milliseconds
(redaction) and microseconds (per-entry check beside the entry's own validation).
"""

from __future__ import annotations

import random
import statistics
import string
import time
from collections.abc import Callable

from prism_om.core.redaction import Redactor
from prism_om.entries import entry_from_wire, find_lone_surrogate, message_entry

SECRETS = ['sk-live-"q"\\KEY-7781', "hunter2, the long one", "user-sk-live", "tok-123456"]


def median_ms(run: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    rng = random.Random(1)
    base = "".join(rng.choice(string.ascii_letters + " ") for _ in range(1_000_000))
    red = Redactor(SECRETS)
    texts = {
        "no secret": base,
        "one secret": SECRETS[0] + base,
        "a secret every 10 KB": "".join(
            base[i : i + 10_000] + SECRETS[(i // 10_000) % len(SECRETS)]
            for i in range(0, len(base), 10_000)
        ),
    }
    print(
        "redaction of 1 MB, 4 secrets "
        "(each in every escaped form up to MAX_ESCAPE_LEVELS), median of 5:"
    )
    for label, text in texts.items():
        print(f"  {label:22s} {median_ms(lambda t=text: red.text(t)):7.1f} ms")
    entry = message_entry(
        "s1",
        "assistant",
        "hello there " * 20,
        tool_calls=[{"id": "c", "name": "n", "arguments": {"x": ["a", "b"], "y": {"z": 1}}}],
    )
    wire = entry.to_wire()
    n = 20_000
    check = median_ms(lambda: [find_lone_surrogate(entry) for _ in range(n)]) * 1000 / n
    build = median_ms(lambda: [entry_from_wire(wire) for _ in range(n)]) * 1000 / n
    print(f"surrogate check per entry {check:.2f} us; validating the entry itself {build:.2f} us")


if __name__ == "__main__":
    main()
