"""Benchmarks of sirerag: scripts run from the repository root as ``python -m benchmarks.NAME ...``.

Every benchmark measures with :mod:`benchmarks.harness` and writes its report in the harness's one
JSON schema (docs/benchmarks.md). Nothing here is part of the installed package, and nothing here
imports the tests.
"""
