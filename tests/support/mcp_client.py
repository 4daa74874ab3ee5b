"""``prism-om mcp`` started the way a desktop client starts it: command, args and env."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.client.stdio import StdioServerParameters


def server_params(db: Path | str, *extra: str, secrets: str = "") -> StdioServerParameters:
    """The stdio server over the store ``db`` (a path or a URL); ``secrets`` go in
    ``PRISM_SECRETS``."""
    env = {"PRISM_SECRETS": secrets} if secrets else {}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "prism_om.cli", "mcp", "--db", str(db), *extra],
        env={**env, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
