"""prism-om benchmarks: ``python -m bench`` prints a table and writes a report.

Not part of the library or its test suite (pytest collects ``tests/`` only). See
``bench/README.md`` for what is measured and how peers are set up.
"""
