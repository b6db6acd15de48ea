"""The bottom layer: record types, errors, configuration and index I/O.

Nothing here imports from another sirerag layer; every other layer may import from here.
"""
