"""Atomic file writes and the index directory's file formats.

Every writer goes through :func:`atomic_path`: it writes to a temporary file in
the same folder and renames it over the target, so a crash never leaves half a
file. Arrays are ``.npy`` loaded with ``allow_pickle=False``; records are JSONL;
nothing is pickled.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from sirerag import __version__
from sirerag.errors import IndexFormatError, InputError

#: Version of the index directory layout; bump on incompatible changes.
FORMAT_VERSION = 1
MANIFEST = "manifest.json"


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it replaces ``path`` (an existing
    folder is renamed away first, then deleted). On failure ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; give it the usual mode
        yield tmp
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_jsonl(path: str | Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write one JSON object per line, atomically; returns the number of lines."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False))
            fh.write("\n")
            n += 1
    return n


def read_jsonl_numbered(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed value)`` for each non-blank line; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}:{lineno}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
            except (ValueError, RecursionError) as exc:  # an integer over 4300 digits, nesting too deep
                raise InputError(f"{path}:{lineno}: unreadable JSON: {exc}") from exc
            yield lineno, value


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the objects of a JSONL file; errors name the file and line. Blank lines are skipped."""
    for lineno, obj in read_jsonl_numbered(path):
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        yield obj


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")


def read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except (ValueError, RecursionError) as exc:  # an integer over 4300 digits, nesting too deep
        raise InputError(f"{path}: unreadable JSON: {exc}") from exc


def save_npy(path: str | Path, array: np.ndarray) -> None:
    """Save a numeric array atomically; object arrays are refused (they would need pickle)."""
    array = np.asarray(array)
    if array.dtype == object:
        raise TypeError(f"refusing to save an object array to {path}: it would need pickle")
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array, allow_pickle=False)


def load_npy(path: str | Path, *, mmap: bool = False) -> np.ndarray:
    path = Path(path)
    if not path.is_file():
        raise IndexFormatError(f"array file not found: {path}")
    return np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)


def write_manifest(directory: str | Path, **content: Any) -> dict[str, Any]:
    """Write ``manifest.json`` with the format and package versions stamped first."""
    manifest = {"format_version": FORMAT_VERSION, "sirerag_version": __version__, **content}
    write_json(Path(directory) / MANIFEST, manifest)
    return manifest


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """Read and check ``manifest.json``; raises :class:`IndexFormatError` on a missing or newer format."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise IndexFormatError(f"{directory} is not a sirerag index: {MANIFEST} is missing")
    manifest = read_json(path)
    version = manifest.get("format_version") if isinstance(manifest, dict) else None
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{path}: format_version {version!r} is not supported by sirerag {__version__} "
            f"(reads format {FORMAT_VERSION}); rebuild the index with this version"
        )
    return manifest
