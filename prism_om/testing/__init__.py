"""Test support that ships with the package, so outside adapters can run our suites."""
