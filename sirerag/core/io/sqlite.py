"""Damaged SQLite caches reported as :class:`~sirerag.core.errors.CacheError`, and their check."""
from __future__ import annotations

import contextlib
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Iterator


def damaged_cache(path: str | Path, reason: object) -> str:
    path = Path(path)
    return (f"{path}: damaged cache ({reason}); check it with: sirerag cache verify {path.parent} "
            f"-- deleting the file loses only cached calls, which are then made again")


#: SQLite's result codes for a file it could not open or write, as opposed to a damaged one
_NOT_DAMAGE = ("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_IOERR", "SQLITE_BUSY", "SQLITE_LOCKED")


def _code(exc: sqlite3.Error) -> str:
    return str(getattr(exc, "sqlite_errorname", "") or "")


#: Free space under which SQLite's "disk I/O error" means a full disk: with a few KB left it cannot grow the
#: 32 KiB shared-memory file of its write-ahead log (SQLITE_IOERR_SHMSIZE), nor write a page.
NEARLY_FULL = 1 << 20


def _nearly_full(path: str | Path) -> bool:
    """Whether the file system holding ``path`` (or its nearest existing folder) has under :data:`NEARLY_FULL`
    bytes free for this user."""
    folder = Path(path).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free < NEARLY_FULL
    except OSError:
        return False


@contextlib.contextmanager
def cache_errors(path: str | Path) -> Iterator[None]:
    """Turn SQLite's errors about a damaged file into a CacheError naming it, and a full disk into a
    DiskFullError ("disk full while writing FILE")."""
    from sirerag.core.errors import CacheError, DiskFullError

    try:
        yield
    except sqlite3.DatabaseError as exc:
        if _code(exc).startswith("SQLITE_FULL") or "disk is full" in str(exc) or (
                _code(exc).startswith("SQLITE_IOERR") and _nearly_full(path)):
            raise DiskFullError(f"disk full while writing {path} (free some space and run the command again; "
                                "what was cached so far is kept)") from exc
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise
        if _code(exc).startswith(_NOT_DAMAGE):
            raise CacheError(f"{path}: cannot use the cache ({exc}); check the file's permissions and "
                             "the free space") from exc
        raise CacheError(damaged_cache(path, exc)) from exc


def _integrity_rows(uri: str) -> list[str]:
    conn = sqlite3.connect(uri, uri=True)
    try:
        return [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
    finally:
        conn.close()


def integrity_problems(path: str | Path) -> list[str]:
    """``PRAGMA integrity_check`` of one SQLite file, opened read-only; empty when it is sound.
    A file on a read-only folder or file system (where SQLite cannot make the WAL's shared-memory
    file) is opened as immutable instead, so only real damage is reported.

    Raises:
        OSError: the file cannot be read at all (permissions): that says nothing about damage.
    """
    uri = Path(path).absolute().as_uri()
    with open(path, "rb"):  # unreadable: an OSError, not "damaged"
        pass
    try:
        rows = _integrity_rows(f"{uri}?mode=ro")
    except sqlite3.DatabaseError as exc:
        if not _code(exc).startswith(_NOT_DAMAGE):
            return [str(exc)]
        try:
            rows = _integrity_rows(f"{uri}?mode=ro&immutable=1")
        except sqlite3.DatabaseError as again:
            return [str(again)]
    return [] if rows == ["ok"] else rows


def find_databases(path: str | Path) -> list[Path]:
    """The ``.sqlite`` files at ``path``: the file itself, or every one under a folder."""
    path = Path(path)
    return [path] if path.is_file() else sorted(p for p in path.rglob("*.sqlite") if p.is_file())


def connect_cache(path: Path, schema: str) -> sqlite3.Connection:
    """A connection to the cache file ``path`` (its folder created if missing) in WAL mode, shareable between
    threads (callers hold their own lock), with ``schema`` (``CREATE TABLE IF NOT EXISTS ...``) applied."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=60.0, check_same_thread=False)
    with cache_errors(path), conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(schema)
    return conn


class CacheFile:
    """One SQLite cache file, ``directory / name``: its connection (:func:`connect_cache`, with ``schema``) and
    the lock every use of it holds."""

    def __init__(self, directory: str | Path, name: str, schema: str) -> None:
        self.path = Path(directory) / name
        self._lock = threading.Lock()
        self._conn = connect_cache(self.path, schema)

    def close(self) -> None:
        """Close the connection."""
        with cache_errors(self.path), self._lock:
            self._conn.close()
