"""Damaged SQLite caches reported as :class:`~sirerag.errors.CacheError`, and their check."""
from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Iterator


def damaged_cache(path: str | Path, reason: object) -> str:
    path = Path(path)
    return (f"{path}: damaged cache ({reason}); check it with: sirerag cache verify {path.parent} "
            f"-- deleting the file loses only cached calls, which are then made again")


@contextlib.contextmanager
def cache_errors(path: str | Path) -> Iterator[None]:
    """Turn SQLite's errors about a damaged file into a CacheError naming it."""
    from sirerag.errors import CacheError

    try:
        yield
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise
        raise CacheError(damaged_cache(path, exc)) from exc


def integrity_problems(path: str | Path) -> list[str]:
    """``PRAGMA integrity_check`` of one SQLite file, opened read-only; empty when it is sound."""
    try:
        conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)
        try:
            rows = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    return [] if rows == ["ok"] else rows


def find_databases(path: str | Path) -> list[Path]:
    """The ``.sqlite`` files at ``path``: the file itself, or every one under a folder."""
    path = Path(path)
    return [path] if path.is_file() else sorted(p for p in path.rglob("*.sqlite") if p.is_file())
