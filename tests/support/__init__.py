"""Helpers shared by test modules and by the subprocesses that tests start.

Test modules never import each other: what two of them share lives here. ``tests/`` is on
``sys.path`` (pyproject's ``pythonpath``), so tests import ``support.<module>``; the
crash workers are run by file path with ``sys.executable`` and import only ``prism_om``.
"""
