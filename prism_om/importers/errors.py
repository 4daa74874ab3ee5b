"""The errors an import raises; all are ``InvalidInputError``, so nothing is ever written.

They are defined in ``prism_om.errors`` with the rest of the tree.
"""

from __future__ import annotations

from ..errors import ImportFormatError, ImportOrderError, ImportTimeError, SessionExistsError

__all__ = ["ImportFormatError", "ImportOrderError", "ImportTimeError", "SessionExistsError"]
