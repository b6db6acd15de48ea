"""The index directory's file formats, written atomically.

Every writer goes through :func:`~sirerag.core.io.atomic.atomic_path`: it writes to a temporary file in
the same folder and renames it over the target, so a crash never leaves half a
file. Arrays are ``.npy`` loaded with ``allow_pickle=False``; records are JSONL;
nothing is pickled.
"""
from __future__ import annotations

import json
import logging
import mmap as mmap_module  # load_npy takes an argument named mmap
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import orjson

from sirerag.core.errors import IndexFormatError, InputError
from sirerag.core.io.atomic import atomic_path
from sirerag.core.io.unicode import has_surrogate_escape, report_surrogates, strip_surrogates

logger = logging.getLogger(__name__)

def write_jsonl(path: str | Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write one JSON object per line, atomically; returns the number of lines."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False))
            fh.write("\n")
            n += 1
    return n


def loads_index_json(raw: bytes | str) -> Any:  # Any: a parsed JSON value
    """Parse one JSON value of an index file: with orjson (several times faster on the pool's and the graph's
    files, which every search reads at start); what orjson refuses and the standard library reads (``NaN``,
    a lone surrogate) goes to :func:`json.loads`, whose error the caller reports.

    Raises:
        ValueError: the text is not JSON (``json.JSONDecodeError``), or it is unreadable (too deep).
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def read_index_json(path: str | Path) -> Any:  # Any: a parsed JSON value
    """A JSON file of an index, parsed by :func:`loads_index_json`; IndexFormatError naming it if unreadable."""
    try:
        return loads_index_json(Path(path).read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        raise IndexFormatError(f"{path}: unreadable index file ({exc}); rebuild the index") from exc


def read_jsonl_numbered(path: str | Path, *,
                        keep_surrogates: bool = False) -> Iterator[tuple[int, Any]]:  # Any: parsed JSON values
    """Yield ``(line number, parsed value)`` for each non-blank line; errors name the file and line.
    Lone surrogates are removed from every string, with a count in the log (unless ``keep_surrogates``:
    the caller cleans the text itself)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    lines: list[tuple[int, int]] = []  # (line, surrogates removed) of the lines that had some
    try:
        yield from _numbered(path, keep_surrogates, lines)
    finally:  # also when the reader stops early
        report_surrogates(path, sum(n for _, n in lines), [lineno for lineno, _ in lines])


def _numbered(path: Path, keep_surrogates: bool, lines: list[tuple[int, int]]) -> Iterator[tuple[int, Any]]:
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
            if not keep_surrogates and b"\\u" in raw and has_surrogate_escape(raw):
                value, n = strip_surrogates(value)
                if n:
                    lines.append((lineno, n))
            yield lineno, value


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the objects of a JSONL file; errors name the file and line. Blank lines are skipped."""
    for lineno, obj in read_jsonl_numbered(path):
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        yield obj


def json_type(value: object) -> str:
    """The JSON name of a parsed value's type (for error messages)."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
             float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def write_json(path: str | Path, obj: object) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")


def user_cache_dir(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/sirerag/<parts>`` (``~/.cache/sirerag/...`` when the variable is unset): the
    per-user folder for what is made once per machine (numba's compiled code, ONNX exports)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base, "sirerag", *parts)


def read_json(path: str | Path, *, keep_surrogates: bool = False) -> Any:  # Any: a parsed JSON value
    """The parsed JSON file; errors name it. Lone surrogates are removed as by :func:`read_jsonl_numbered`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
        value = json.loads(text)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except (ValueError, RecursionError) as exc:  # an integer over 4300 digits, nesting too deep
        raise InputError(f"{path}: unreadable JSON: {exc}") from exc
    if not keep_surrogates and "\\u" in text and has_surrogate_escape(text.encode("utf-8", "replace")):
        value, n = strip_surrogates(value)
        if n:
            logger.warning("%s: removed %d lone surrogate(s) (escapes such as \\ud800 that are not Unicode "
                           "text)", path, n)
    return value


def save_npy(path: str | Path, array: np.ndarray) -> None:
    """Save a numeric array atomically; object arrays are refused (they would need pickle)."""
    array = np.asarray(array)
    if array.dtype == object:
        raise TypeError(f"refusing to save an object array to {path}: it would need pickle")
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array, allow_pickle=False)


def load_npy(path: str | Path, *, mmap: bool = False, index: str | Path | None = None,
             scattered: bool = False) -> np.ndarray:
    """Load a numeric ``.npy`` array (never pickled objects).

    With ``mmap`` and ``scattered`` (a caller that gathers a few rows here and there, such as bridging's
    proposition rows) the kernel is told not to read ahead around each page it faults in (``MADV_RANDOM``, where
    the platform has it): with a large read-ahead a search that reads a few thousand rows would otherwise read
    most of the file from disk.

    Raises:
        IndexFormatError: the file is missing, truncated, not an ``.npy`` array or holds
            Python objects; the message names the file and, with ``index``, how to check it.
    """
    path = Path(path)
    if not path.is_file():
        raise IndexFormatError(damaged(path, "array file is missing", index))
    try:
        array = np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except ValueError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "pickle" in reason:  # numpy's wording for anything without the .npy header
            reason = "not a numeric .npy array (no .npy header: random bytes, or pickled objects)"
        raise IndexFormatError(damaged(path, f"damaged array file: {reason}", index)) from exc
    except (EOFError, OSError) as exc:
        raise IndexFormatError(damaged(path, f"damaged array file: {type(exc).__name__}: {exc}", index)) from exc
    if not isinstance(array, np.ndarray):
        raise IndexFormatError(damaged(path, f"expected one .npy array, got {type(array).__name__}", index))
    if mmap and scattered:
        advise_scattered(array)
    return array


def advise(array: np.ndarray | None, option: str) -> bool:
    """``madvise(option)`` (an ``mmap`` constant's name, e.g. ``"MADV_RANDOM"``) on the open map behind
    ``array`` (a memory-mapped array or a view of one). False, and nothing done, for an array in memory or where
    the platform lacks the option."""
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, mmap_module.mmap) and not base.closed and hasattr(mmap_module, option):
        base.madvise(getattr(mmap_module, option))
        return True
    return False


def advise_scattered(array: np.ndarray) -> bool:
    """Tell the kernel that the pages of the memory-mapped ``array`` are read scattered (``MADV_RANDOM``: no
    read-ahead around a faulted page). False, and nothing done, for an array in memory or without ``madvise``."""
    return advise(array, "MADV_RANDOM")


def scattered_map(array: np.ndarray) -> np.ndarray:
    """A second read-only map of the ``.npy`` file behind the memory-mapped ``array``, advised scattered
    (:func:`advise_scattered`), for a reader that gathers rows of it while another scans it whole through
    ``array`` (the pages are shared); ``array`` itself when it is not a map of a whole ``.npy`` file."""
    name = getattr(array, "filename", None)
    if not isinstance(array, np.memmap) or not name:
        return array
    twin = load_npy(name, mmap=True, scattered=True)
    return twin if twin.shape == array.shape and twin.dtype == array.dtype else array


def damaged(path: str | Path, what: str, index: str | Path | None = None) -> str:
    """The message for a damaged index file: the file, what is wrong and what to do."""
    fix = f"rebuild the index (sirerag build) or check it with: sirerag verify {index}" if index is not None \
        else "rebuild the index (sirerag build) or check it with sirerag verify"
    return f"{path}: {what}; {fix}"
