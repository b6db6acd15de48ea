"""Reading and writing: JSONL/NPY/JSON files written atomically, manifests, corpora."""
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

__all__ = [
    "FORMAT_VERSION",
    "atomic_dir",
    "atomic_path",
    "load_npy",
    "read_json",
    "read_jsonl",
    "read_manifest",
    "save_npy",
    "write_json",
    "write_jsonl",
    "write_manifest",
]
