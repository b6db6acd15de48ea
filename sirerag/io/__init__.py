"""Reading and writing: JSONL/NPY/JSON files written atomically, manifests, corpora, TSV collections."""
from __future__ import annotations

from sirerag.io.files import (
    FORMAT_VERSION,
    atomic_dir,
    atomic_path,
    load_npy,
    read_json,
    read_jsonl,
    read_manifest,
    save_npy,
    write_json,
    write_jsonl,
    write_manifest,
)
from sirerag.io.tsv import collection_text, write_collection

__all__ = [
    "FORMAT_VERSION",
    "atomic_dir",
    "atomic_path",
    "collection_text",
    "load_npy",
    "read_json",
    "read_jsonl",
    "read_manifest",
    "save_npy",
    "write_collection",
    "write_json",
    "write_jsonl",
    "write_manifest",
]
