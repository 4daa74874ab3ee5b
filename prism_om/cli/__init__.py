"""The ``prism-om`` command: one module per subcommand group, wired in ``app``."""

from __future__ import annotations

from .app import main

__all__ = ["main"]
