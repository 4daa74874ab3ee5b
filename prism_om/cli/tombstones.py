"""``--tombstone-scope``: the read commands withhold what the store's tombstones revoke.

Revocation outside the API (docs/design.md, "Withholding revoked memory"): the CLI
reads the tombstones the deletion propagator wrote into the store itself, from every
scope unless ``--tombstone-scope`` names some (repeatable), and passes them as the
invalidation set of each read path. A revoked item is printed as ``[revoked]`` with its
id and nothing of its text. ``observe`` reads them too, so a revoked message never
reaches a worker (the write side).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ..stores import SessionStore

__all__ = ["TOMBSTONE_COMMANDS", "add_tombstone_scope", "cli_invalidated_ids"]

TOMBSTONE_COMMANDS: Final = (
    "status",
    "view",
    "recall",
    "page",
    "search",
    "compact",
    "observe",
    "mcp",
    "inspect",
)


def add_tombstone_scope(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tombstone-scope",
        action="append",
        dest="tombstone_scopes",
        metavar="SCOPE",
        help="withhold what this scope's tombstones revoke (repeatable; default: every "
        "scope with tombstones in the store)",
    )


async def cli_invalidated_ids(store: SessionStore, args: argparse.Namespace) -> frozenset[str]:
    """The invalidation set the command's ``--tombstone-scope`` options select."""
    # Imported on use, like the subcommands, so ``--help`` stays quick.
    from ..observational_memory.revocation import (
        list_store_invalidated_ids,
        list_tombstone_scopes,
    )
    from .output import error_console

    scopes: list[str] | None = getattr(args, "tombstone_scopes", None)
    if scopes:
        known = set(await list_tombstone_scopes(store))
        for scope in dict.fromkeys(scopes):
            if scope not in known:
                # Not an error: a scope may simply have revoked nothing yet. Said aloud
                # because a mistyped scope would otherwise withhold nothing, silently.
                error_console().print(
                    f"prism-om: warning: no tombstones for scope {scope!r} in {store.url}"
                )
    return await list_store_invalidated_ids(store, scopes or None)
