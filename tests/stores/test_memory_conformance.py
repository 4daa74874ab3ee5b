"""Observational-memory conformance, run against every adapter by URL."""

from __future__ import annotations

from prism_om.testing.memory_conformance import MemoryConformance


class TestMemoryConformance(MemoryConformance):
    """Runs every memory conformance test once per adapter (see ``store_opener``)."""
