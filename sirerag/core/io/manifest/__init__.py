"""``manifest.json``: the commit record of an index directory, read and written as a typed :class:`Manifest`.

The manifest is written last, into the staged folder, and lists every file of the index (``files``: path
-> :class:`FileRecord`: size, sha256, and row count for ``.jsonl`` or dtype, shape and a sample checksum
for ``.npy``). Loading checks sizes and array samples (cheap); :func:`commit_id` names the commit a reader
loaded; :func:`check_files` with ``hashes=True`` (``sirerag verify``) checks every byte. ``cache/`` is not
part of the index: it is kept across rebuilds and never listed.

This package alone reads the JSON object: the rest of sirerag reads the typed :class:`Manifest` and its
records (``tests/test_manifest.py`` fails on a module that subscripts a manifest). :meth:`Manifest.to_dict`
writes the keys older versions wrote, in the order they were read, so an index written now loads in them.
"""
from __future__ import annotations

from sirerag.core.io.checksums import (
    MANIFEST, SAMPLE_BLOCK, SAMPLE_BLOCKS, UNLISTED, file_record, file_records, npy_header, sample_digest)
from sirerag.core.io.manifest.disk import (
    check_files, check_sample, commit_id, listed_names, parse_manifest, read_manifest, refresh_files, rewrite_manifest,
    sha256_matches, write_manifest)
from sirerag.core.io.manifest.model import SECTIONS, Manifest
from sirerag.core.io.manifest.records import (
    FORMAT_MARKER, FORMAT_VERSION, HEADER, Component, Corpus, Drift, EmbedderRecord, FileRecord, GraphStats, Resources)
from sirerag.core.io.manifest.sections import ConfigRecord, Counts, HistoryEntry, PoolCounts, TreeCounts

__all__ = [
    "FORMAT_MARKER", "FORMAT_VERSION", "HEADER", "MANIFEST", "SAMPLE_BLOCK", "SAMPLE_BLOCKS", "SECTIONS", "UNLISTED",
    "Component", "ConfigRecord", "Corpus", "Counts", "Drift", "EmbedderRecord", "FileRecord", "GraphStats",
    "HistoryEntry", "Manifest", "PoolCounts", "Resources", "TreeCounts", "check_files",
    "check_sample",
    "commit_id", "file_record", "listed_names", "file_records", "npy_header", "parse_manifest", "read_manifest", "refresh_files",
    "rewrite_manifest", "sample_digest", "sha256_matches", "write_manifest",
]
