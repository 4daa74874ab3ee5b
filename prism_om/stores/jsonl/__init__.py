"""The JSONL adapter: one append-only, human-readable log file per session.

Modules, one job each:

- ``store``: ``JsonlStore``, opening, locking, noticing other processes' writes, and
  appends (its docstring describes the files and their protocol).
- ``files``: the files' names, the sidecars' shape, raw reads and writes on them.
- ``loading``: a session file read into the segment index, its message bodies left on
  disk until read.
- ``repair``: ``check`` and ``check --repair`` of the session files.
- ``deletion``: deleting a session, and the debris of writes and deletes that never
  finished.
- ``index_sidecar``: ``.<session>.index``, what a reopen needs of a session file (ids,
  parents, kinds, token counts, a digest) without parsing it.
- ``id_index``: ``.ids``, the entry ids each session file holds, store-wide.

The tree itself (branches, segments, the lazily read bodies) is the segment index shared
with the in-memory adapter (``stores.segment_index``).
"""

from __future__ import annotations

from .store import JsonlStore, SessionCheck

__all__ = ["JsonlStore", "SessionCheck"]
