"""A hand-built forked session the page tests share: a trunk of 60 messages with three
forks of 25, every role, ids ``tN`` and ``fK-N``."""

from __future__ import annotations

import random

from prism_om.entries import Role, SessionEntry
from prism_om.testing.generate import make_message


def forked_session() -> list[SessionEntry]:
    """A trunk of 60 messages with three forks of 25, every role."""
    rng = random.Random(16)
    roles: tuple[Role, ...] = ("user", "assistant", "tool", "assistant")
    entries: list[SessionEntry] = []
    parent: str | None = None
    for n in range(60):
        entry = make_message("p", f"t{n}", parent, roles[n % 4], f"trunk {n}", n)
        entries.append(entry)
        parent = entry.id
    for fork in range(3):
        parent = f"t{rng.randrange(10, 55)}"
        for n in range(25):
            entry = make_message("p", f"f{fork}-{n}", parent, roles[n % 4], f"fork {n}", 100 + n)
            entries.append(entry)
            parent = entry.id
    return entries
