"""Looking at an index: statistics, the ``sirerag inspect`` HTML report and evaluation plots.

Reads index files only; sits after :mod:`sirerag.evaluation` and before the CLI, and
nothing in the core imports it.
"""
