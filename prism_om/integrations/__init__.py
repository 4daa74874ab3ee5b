"""Adapters to agent frameworks, each behind its own extra (``prism-om[agents]``, ...).

Importing this package imports no framework; each integration is its own subpackage.
"""
