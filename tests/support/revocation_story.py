"""One small branch with three observations over three messages, for revocation tests."""

from __future__ import annotations

import random

from prism_om.testing.om_factories import BranchBuilder


def story() -> tuple[BranchBuilder, dict[str, str]]:
    b = BranchBuilder(session_id="s1", rng=random.Random(3))
    m1 = b.message("user", "the invoice number is 4471")
    m2 = b.message("assistant", "noted")
    m3 = b.message("user", "deploy friday")
    rec = b.observe(1, sources=[m1.id, m2.id], text="Invoice 4471")
    rec2 = b.observe(1, sources=[m3.id], text="Deploy on friday")
    rec3 = b.observe(1, sources=[m2.id, m3.id], text="Assistant acknowledged")
    assert rec.data and rec2.data and rec3.data
    ids = {
        "m1": m1.id,
        "m2": m2.id,
        "m3": m3.id,
        "o1": rec.data["observations"][0]["id"],
        "o2": rec2.data["observations"][0]["id"],
        "o3": rec3.data["observations"][0]["id"],
    }
    for _ in range(10):  # push the sources out of the recent-message window
        b.message("user")
    return b, ids
