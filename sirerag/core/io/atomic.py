"""Atomic writes: a file or folder is written beside its target under a temporary name and renamed (or, for
a folder, exchanged) over it, so a crash never leaves half a file and a reader never sees half a folder."""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Callable, Iterator

from sirerag.core.errors import DiskFullError

try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
except OSError:  # pragma: no cover - no C library to load
    _LIBC = None


def _unique_sibling(path: Path, tag: str, make: Callable[[Path], None]) -> Path:
    """Create a new file or folder ``.<name>.<tag>-<random>`` beside ``path`` with ``make``."""
    for _ in range(100):
        candidate = path.with_name(f".{path.name}.{tag}-{secrets.token_hex(4)}")
        try:
            make(candidate)
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary name beside {path}")  # pragma: no cover


def _new_file(path: Path) -> None:
    # the mode is filtered by the process umask in the kernel: no umask read or write here
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))


def make_temp_dir(path: str | Path, tag: str = "tmp") -> Path:
    """A new empty folder beside ``path`` (same file system, so it can be renamed over it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return _unique_sibling(path, tag, lambda p: os.mkdir(p, 0o777))


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = _unique_sibling(path, "tmp", _new_file)
    try:
        try:
            yield tmp_path
        except OSError as exc:
            if is_disk_full(exc):
                raise DiskFullError(f"disk full while writing {path} (free some space and run the command "
                                    "again)") from exc
            raise
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def is_disk_full(exc: BaseException) -> bool:
    """Whether an error says the file system is full (ENOSPC, EDQUOT, or numpy's short write)."""
    if isinstance(exc, DiskFullError):
        return False
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, OSError) and exc.errno is None and _SHORT_WRITE.search(str(exc)) is not None


_SHORT_WRITE = re.compile(r"^\d+ requested and \d+ written$")


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    func = getattr(_LIBC, "renameat2", None) if _LIBC is not None else None
    if func is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if func(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False  # not supported by this kernel or file system
    raise OSError(err, os.strerror(err), str(a))


def swap_dir(new: Path, path: Path) -> Path | None:
    """Put the folder ``new`` at ``path`` so that a reader of ``path`` sees the old folder or
    the new one, never neither where the platform allows it (an atomic exchange on Linux).

    Returns where the old folder now is (``new``'s name, or an ``.old-`` sibling), or None
    when ``path`` did not exist; the caller deletes it.
    """
    if not path.exists():
        os.rename(new, path)
        return None
    if _exchange(new, path):
        return new
    old = path.with_name(f".{path.name}.old-{secrets.token_hex(4)}")
    os.rename(path, old)  # fallback: a short moment without ``path``
    os.replace(new, path)
    return old


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it replaces ``path`` in one swap
    (the old folder is deleted after). On failure ``path`` is left as it was."""
    path = Path(path)
    tmp = make_temp_dir(path)
    try:
        try:
            yield tmp
        except OSError as exc:
            if is_disk_full(exc):
                name = f"{path}/{Path(exc.filename).name}" if getattr(exc, "filename", None) else str(path)
                raise DiskFullError(f"disk full while writing {name} (free some space and run the command "
                                    "again)") from exc
            raise
        old = swap_dir(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
