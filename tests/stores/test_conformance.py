"""The conformance suite, run against every adapter by URL."""

from __future__ import annotations

from prism_om.testing.conformance import StoreConformance


class TestStoreConformance(StoreConformance):
    """Runs every conformance test once per adapter (see ``store_opener`` in conftest)."""
