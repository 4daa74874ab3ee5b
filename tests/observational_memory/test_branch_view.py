"""``BranchView`` builds exactly the blocks of the pure path, however warm its caches are.

The view keeps the rendered memory block by what it shows and each message's rendered
block and token counts by entry id; the blocks must equal
``core.context_blocks.context_blocks_from_snapshot`` of the same snapshot, text and token
counts included, on the first build, on a repeat, and after the snapshot moved on.
"""

from __future__ import annotations

import pytest

from prism_om.core.branch_snapshot import advance_snapshot, snapshot_from_branch
from prism_om.core.context_blocks import BlockOptions, context_blocks_from_snapshot
from prism_om.entries import message_entry
from prism_om.observational_memory.branch_view import BranchView
from prism_om.testing.om_factories import random_builder
from prism_om.tokens import get_estimator


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("keep", [0, 3, 8])
def test_the_view_builds_the_blocks_of_the_pure_path(seed: int, keep: int) -> None:
    builder = random_builder(seed, steps=70, session_id="bv")
    branch = builder.path
    est = get_estimator()
    secrets = ("deploy",) if seed % 2 else ()
    messages = [e.id for e in branch if e.kind == "message"]
    revoked = frozenset(messages[::7]) if seed % 3 == 0 else frozenset()
    view = BranchView(
        keep_recent_entries=keep, recent_message_max_tokens=None, estimator=est, secrets=secrets
    )
    options = BlockOptions(keep, None, revoked, secrets, est)
    snapshot = snapshot_from_branch(branch, keep, full=True)
    for _ in range(2):  # cold, then warm
        built = view.blocks(snapshot, revoked)
        assert list(built.blocks) == context_blocks_from_snapshot(snapshot, options)
    # The snapshot moves on by a turn: the cached blocks still give the pure answer.
    turn = [
        message_entry("bv", "user", "and the deploy moved to friday", parent_id=branch[-1].id),
    ]
    turn.append(message_entry("bv", "assistant", "noted", parent_id=turn[0].id))
    advanced = advance_snapshot(snapshot, turn)
    assert advanced is not None
    assert list(view.blocks(advanced, revoked).blocks) == context_blocks_from_snapshot(
        advanced, options
    )
