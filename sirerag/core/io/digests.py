"""The sha256 of a large file that does not change (a model's weights), remembered across processes.

Checking MiniLM's 90 MB of weights costs about 0.07 s, every time a search starts. The digest is kept in the
per-user cache (``$XDG_CACHE_HOME/sirerag/file-sha256/``) with the file's stat: its size, modification time,
inode and status-change time. A write to the file changes its status-change time, which no user command
can set back, so a memo whose stat differs from the file's is hashed again (and rewritten); a memo that
cannot be read or written is ignored (a read-only home only costs the hash).
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from sirerag.core.io.atomic import atomic_path
from sirerag.core.io.checksums import sha256_file
from sirerag.core.io.files import user_cache_dir

logger = logging.getLogger(__name__)

MEMO_DIR = "file-sha256"


def file_sha256(path: str | Path) -> str:
    """The sha256 hex digest of the file at ``path`` (resolved), from the memo when its stat still matches."""
    path = Path(path).resolve()
    stat = path.stat()
    return _digest(str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns)


@functools.lru_cache(maxsize=16)
def _digest(path: str, size: int, mtime_ns: int, inode: int, ctime_ns: int) -> str:
    stamp: dict[str, Any] = {"path": path, "size": size, "mtime_ns": mtime_ns, "inode": inode,
                             "ctime_ns": ctime_ns}
    memo = user_cache_dir(MEMO_DIR, hashlib.sha256(path.encode("utf-8")).hexdigest()[:16] + ".json")
    try:
        known = json.loads(memo.read_text(encoding="utf-8"))
        if isinstance(known, dict) and isinstance(known.get("sha256"), str) and \
                {k: known.get(k) for k in stamp} == stamp:
            return known["sha256"]
    except (OSError, ValueError):
        pass
    hexdigest = sha256_file(path)
    try:
        with atomic_path(memo) as tmp:
            tmp.write_text(json.dumps({**stamp, "sha256": hexdigest}) + "\n", encoding="utf-8")
    except OSError as exc:
        logger.debug("cannot remember the sha256 of %s in %s: %s", path, memo, exc)
    return hexdigest


__all__ = ["MEMO_DIR", "file_sha256"]
