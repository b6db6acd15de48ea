"""One writer per index folder: an advisory ``fcntl.flock`` on a lock file beside it.

Every command that writes an index folder (``build``, ``export``, building a ColBERT
index, ``add``/``remove``) holds :func:`index_lock` while it writes; a second
writer fails at once with the pid and start time of the first. Readers never take the
lock: the folder they read is replaced in one swap (see :mod:`sirerag.core.io.staging`).
The lock file ``.<name>.lock`` stays beside the folder (deleting it would race).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator

from sirerag.core.errors import IndexLockedError


def lock_path(path: str | Path) -> Path:
    """The lock file of the folder ``path``: ``.<name>.lock`` in its parent (symlinks resolved, so every
    writer of one folder takes one lock, whichever link it was given)."""
    path = Path(path).expanduser().resolve()
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def index_lock(path: str | Path, command: str = "write") -> Iterator[Path]:
    """Hold the write lock of the folder ``path`` (which need not exist yet).

    Args:
        path: the index (or export) folder.
        command: what the holder does, shown to a second writer.

    Raises:
        IndexLockedError: another process holds the lock ("PATH is being written by pid N (started ...)").
    """
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "another process"
            raise IndexLockedError(f"{path} is being written by {holder}; wait for it to finish "
                                   "or write somewhere else") from None
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} (started {started}, sirerag {command})\n".encode(), 0)
        yield lock
    finally:
        os.close(fd)  # releases the lock
