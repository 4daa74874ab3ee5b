"""The inspect page's routes: every one a ``GET`` that reads and never writes."""

from __future__ import annotations

from .pages import ROUTES

__all__ = ["ROUTES"]
