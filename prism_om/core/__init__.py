"""The pure core: records, folds, validation, views and renderers over entry lists.

Nothing here does I/O, holds a store, reads settings or calls a provider. Every module
imports only :mod:`prism_om.entries`, :mod:`prism_om.ids`, :mod:`prism_om.errors`,
:mod:`prism_om.tokens` and other ``core`` modules, so the stores (one layer up) and the
services (two layers up) can share one implementation of each rule.
"""
