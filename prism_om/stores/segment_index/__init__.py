"""The in-process segment index of session trees, shared by the memory and JSONL adapters.

A branch is a short list of (segment, depth range) pieces, as in the SQL adapters'
tables (docs/design.md, "The store architecture"), kept in Python dicts here.

Modules, one job each:

- ``index``: ``TreeIndex``, the trees, segments and memory folds: the reference the other
  adapters must equal.
- ``reads``: ``TreeIndexReads``, the per-turn reads of a store built on a ``TreeIndex``.
- ``lazy_entries``: entries by id where a message is only where its line lies in a file
  (JSONL), read back when asked for, with a bounded cache of parsed ones.
"""
