"""Arrays a build writes in blocks and reads back memory-mapped, so that its vectors need not all be held.

:func:`npy_writer` makes an ``.npy`` file of a known shape and yields it memory-mapped for writing (numpy's
``open_memmap``, on a temporary file renamed over the target when the block ends, like every writer here); its
bytes are the bytes ``np.save`` writes for the same array. :func:`map_npy` opens an ``.npy`` file read-only and
memory-mapped; :func:`drop_pages` tells the kernel that the pages of such an array that were read are not needed
now (they are clean copies of the file: a later read gets them again from the page cache or the disk), so they
stop counting in the process's resident size.
"""
from __future__ import annotations

import contextlib
import mmap
from pathlib import Path
from typing import Iterator

import numpy as np

from sirerag.core.errors import IndexFormatError
from sirerag.core.io.atomic import atomic_path
from sirerag.core.io.files import advise, damaged


@contextlib.contextmanager
def npy_writer(path: str | Path, shape: tuple[int, ...], dtype: np.dtype | type = np.float32) -> Iterator[np.ndarray]:
    """Yield a writable array of ``shape`` and ``dtype`` mapped on a new ``.npy`` file, renamed to ``path`` when
    the block ends without an error (a failed block leaves no file). The caller fills every row; rows it does not
    fill are zeros."""
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise TypeError(f"refusing to write an object array to {path}: it would need pickle")
    with atomic_path(path) as tmp:
        if int(np.prod(shape)) == 0:  # nothing to map: the header alone
            with open(tmp, "wb") as fh:
                np.save(fh, np.zeros(shape, dtype=dtype), allow_pickle=False)
            yield np.zeros(shape, dtype=dtype)
            return
        array = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
        try:
            yield array
            array.flush()
        finally:
            del array  # the map closes with its last reference


def map_npy(path: str | Path, *, index: str | Path | None = None) -> np.ndarray:
    """The array of an ``.npy`` file, read-only and memory-mapped (its pages are read when used).

    Raises:
        IndexFormatError: the file is missing, not an ``.npy`` array, holds Python objects or is shorter than
            its header says; the message names the file.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(fh)
            offset = fh.tell()
            if dtype.hasobject:
                raise ValueError("holds Python objects (pickle)")
            size = offset + int(np.prod(shape)) * dtype.itemsize
            if path.stat().st_size < size:
                raise ValueError(f"{path.stat().st_size} bytes, the header says {size}")
            buffer = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise IndexFormatError(damaged(path, "array file is missing", index)) from None
    except (ValueError, OSError, EOFError) as exc:
        raise IndexFormatError(damaged(path, f"damaged array file: {exc}", index)) from exc
    return np.ndarray(shape, dtype=dtype, buffer=buffer, offset=offset, order="F" if fortran else "C")


def drop_pages(array: np.ndarray | None) -> None:
    """Let the kernel take back the pages of a :func:`map_npy` array (or a view of one) that were read; nothing
    for an array in memory, or where ``madvise`` is missing."""
    advise(array, "MADV_DONTNEED")
