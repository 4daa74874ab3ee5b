"""The install hint for a missing optional extra, the same wherever one is missing."""

from __future__ import annotations

__all__ = ["install_hint"]


def install_hint(extra: str) -> str:
    """How to install ``extra``: from PyPI, and from a clone of the repository."""
    return (
        f"pip install 'prism-om[{extra}]' (from a clone of the repository: "
        f"pip install '.[{extra}]')"
    )
