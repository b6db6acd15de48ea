"""Reading and writing: JSONL/NPY/JSON files written atomically, manifests, locks, TSV collections."""
from __future__ import annotations

from sirerag.core.io.atomic import atomic_dir, atomic_path
from sirerag.core.io.files import (
    damaged,
    load_npy,
    read_json,
    read_jsonl,
    save_npy,
    user_cache_dir,
    write_json,
    write_jsonl,
)
from sirerag.core.io.lock import index_lock
from sirerag.core.io.manifest import (
    FORMAT_VERSION,
    MANIFEST,
    check_files,
    read_manifest,
    write_manifest,
)
from sirerag.core.io.tsv import collection_text, write_collection

__all__ = [
    "FORMAT_VERSION",
    "MANIFEST",
    "atomic_dir",
    "atomic_path",
    "check_files",
    "damaged",
    "index_lock",
    "collection_text",
    "load_npy",
    "read_json",
    "read_jsonl",
    "read_manifest",
    "save_npy",
    "user_cache_dir",
    "write_collection",
    "write_json",
    "write_jsonl",
    "write_manifest",
]
