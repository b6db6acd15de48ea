"""Arrays written in blocks and read back memory-mapped: the bytes ``np.save`` writes, read-only maps, damaged
files named, and pages handed back."""
from __future__ import annotations

import io
import os
import sys

import numpy as np
import pytest

from sirerag.core.errors import IndexFormatError
from sirerag.core.io.mapped import drop_pages, map_npy, npy_writer
from sirerag.pipeline.resources import rss_mib


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


@pytest.mark.parametrize("shape, dtype", [((7, 3), np.float32), ((0, 384), np.float32), ((5,), np.int64)])
def test_a_written_array_has_the_bytes_of_np_save_and_maps_back(tmp_path, shape, dtype) -> None:
    array = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    with npy_writer(tmp_path / "a.npy", shape, dtype) as out:
        out[:] = array
    assert (tmp_path / "a.npy").read_bytes() == _npy_bytes(array)
    mapped = map_npy(tmp_path / "a.npy")
    assert mapped.dtype == np.dtype(dtype) and not mapped.flags.writeable
    np.testing.assert_array_equal(mapped, array)
    assert [p.name for p in tmp_path.iterdir()] == ["a.npy"]  # the temporary file was renamed


def test_a_block_that_raises_leaves_no_file(tmp_path) -> None:
    with pytest.raises(RuntimeError, match="stop"):
        with npy_writer(tmp_path / "a.npy", (4, 2)) as out:
            out[:2] = 1.0
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_object_arrays_are_refused(tmp_path) -> None:
    with pytest.raises(TypeError, match="would need pickle"):
        with npy_writer(tmp_path / "a.npy", (2,), object):
            pass
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(IndexFormatError, match=r"o\.npy.*Python objects"):
        map_npy(tmp_path / "o.npy")


def test_missing_and_short_files_are_named(tmp_path) -> None:
    with pytest.raises(IndexFormatError, match=r"missing\.npy: array file is missing"):
        map_npy(tmp_path / "missing.npy")
    (tmp_path / "short.npy").write_bytes(_npy_bytes(np.zeros((100, 4), dtype=np.float32))[:-16])
    with pytest.raises(IndexFormatError, match=r"short\.npy: damaged array file: .*the header says"):
        map_npy(tmp_path / "short.npy")
    (tmp_path / "junk.npy").write_bytes(b"not an array")
    with pytest.raises(IndexFormatError, match=r"junk\.npy: damaged array file"):
        map_npy(tmp_path / "junk.npy")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident size is read from /proc")
def test_dropped_pages_leave_the_resident_size_and_read_again(tmp_path) -> None:
    rows = np.ones((32 * 1024, 1024), dtype=np.float32)  # 128 MiB
    with npy_writer(tmp_path / "big.npy", rows.shape) as out:
        out[:] = rows
    del rows, out
    mapped = map_npy(tmp_path / "big.npy")
    before = rss_mib()
    assert float(mapped[:, 0].sum()) == 32 * 1024  # every page read
    read = rss_mib()
    drop_pages(mapped[1:])  # a view hands back its whole file's pages
    dropped = rss_mib()
    assert read - before > 64 and read - dropped > 64
    assert float(mapped[:, -1].sum()) == 32 * 1024  # still readable
    drop_pages(np.ones(4))  # an array in memory: nothing



def _read_bytes() -> int:
    with open("/proc/self/io") as fh:  # the kernel's count of bytes this process had read from storage
        return int(next(line for line in fh if line.startswith("read_bytes:")).split()[1])


def _evict(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # clean pages leave the page cache
    finally:
        os.close(fd)


@pytest.mark.skipif(not os.path.exists("/proc/self/io") or not hasattr(os, "posix_fadvise"),
                    reason="needs Linux's per-process I/O counts")
def test_scattered_maps_read_only_the_pages_asked_for(tmp_path) -> None:
    """``load_npy(..., scattered=True)`` turns read-ahead off (``MADV_RANDOM``): gathering one row in every 64
    reads about those rows' pages from storage, where a plain map reads ahead around each."""
    from sirerag.core.io.files import advise_scattered, load_npy, scattered_map

    rows = np.arange(32 * 1024 * 1024, dtype=np.float32).reshape(32 * 1024, 1024)  # 128 MiB, 4 KiB per row
    with npy_writer(tmp_path / "rows.npy", rows.shape) as out:
        out[:] = rows
    every = np.arange(0, rows.shape[0], 64)  # 512 rows, 2 MiB
    expected = float(rows[every].sum())
    del rows, out
    read = {}
    plain = load_npy(tmp_path / "rows.npy", mmap=True)
    # the plain map is read last: pages it maps stay in the page cache for as long as it is open
    maps = {"scattered": lambda: load_npy(tmp_path / "rows.npy", mmap=True, scattered=True),
            "twin": lambda: scattered_map(plain), "plain": lambda: plain}  # twin: a second map of plain's file
    for name, open_map in maps.items():
        _evict(tmp_path / "rows.npy")
        mapped = open_map()
        before = _read_bytes()
        assert float(np.asarray(mapped[every]).sum()) == expected  # the same rows every way
        read[name] = (_read_bytes() - before) / 2**20
        del mapped
    if read["plain"] < 8:
        pytest.skip(f"nothing read ahead here ({read['plain']:.1f} MiB read for 512 rows: a RAM disk, or no "
                    "read-ahead)")
    assert read["scattered"] < read["plain"] / 2 and read["twin"] < read["plain"] / 2, read
    assert advise_scattered(np.ones(4)) is False  # an array in memory: nothing to advise
    in_memory = np.ones((3, 2), dtype=np.float32)
    assert scattered_map(in_memory) is in_memory
