"""The kit's test tools, imported in one place so a missing ``testing`` extra says so.

pytest and hypothesis are not dependencies of prism-om (the package never imports them); they
come with ``pip install 'prism-om[testing]'``. Kit modules import them from here rather than
directly, so that without the extra every kit module fails with the same ``ImportError``
naming the extra instead of a bare ``No module named 'pytest'``.
"""

from __future__ import annotations

TESTING_EXTRA_MESSAGE = (
    "prism_om.testing needs pytest and hypothesis: pip install 'prism-om[testing]'"
)

try:
    import hypothesis
    import pytest
    from hypothesis import strategies as st
except ImportError as exc:
    raise ImportError(
        f"{TESTING_EXTRA_MESSAGE} (could not import {exc.name or exc})", name=exc.name
    ) from exc

__all__ = ["TESTING_EXTRA_MESSAGE", "hypothesis", "pytest", "st"]
