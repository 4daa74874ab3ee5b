"""The JSONL adapter: one append-only, human-readable log file per session.

Modules, one job each:

- ``store``: ``JsonlStore``, the file layout, locking, appends, repair and delete (its
  docstring describes the files and their protocol).
- ``index_sidecar``: ``.<session>.index``, what a reopen needs of a session file (ids,
  parents, kinds, token counts, a digest) without parsing it.
- ``id_index``: ``.ids``, the entry ids each session file holds, store-wide.

The tree itself (branches, segments, the lazily read bodies) is the segment index shared
with the in-memory adapter (``stores.segment_index``).
"""

from __future__ import annotations

from .store import JsonlStore, SessionCheck

__all__ = ["JsonlStore", "SessionCheck"]
