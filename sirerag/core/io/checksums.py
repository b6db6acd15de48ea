"""The record of one index file: size, sha256, and row count (``.jsonl``) or dtype, shape and a sample
checksum (``.npy``); what :mod:`sirerag.core.io.manifest` lists under ``files``."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from sirerag.core.errors import IndexFormatError
from sirerag.core.io.files import damaged

MANIFEST = "manifest.json"
#: Top-level folders of an index directory that are not part of the index (kept across rebuilds).
UNLISTED = ("cache",)
_CHUNK = 1 << 20
#: blocks read for the sample checksum of an array file (64 x 4 KiB: cheap next to loading it)
SAMPLE_BLOCKS = 64
SAMPLE_BLOCK = 4096
#: Files other than ``.npy`` arrays and ``.jsonl`` records that get a sample checksum (loaded memory-mapped,
#: never read whole). A ``.jsonl`` file gets one too, besides its row count: a reader that maps it and reads a
#: few lines (the pool's entries through their table, the documents a search shows) checks the sample.
SAMPLED_SUFFIXES = (".usearch",)


def file_record(path: str | Path) -> dict[str, Any]:
    """Size, sha256 and (``.jsonl``) line count or (``.npy``) dtype and shape of one file; ``.jsonl``, ``.npy`` and
    :data:`SAMPLED_SUFFIXES` files also get a sample checksum."""
    path = Path(path)
    digest, size, lines = hashlib.sha256(), 0, 0
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
            size += len(block)
            lines += block.count(b"\n")
    record: dict[str, Any] = {"size": size, "sha256": digest.hexdigest()}
    if path.suffix == ".jsonl":
        record.update(rows=lines, sample_sha256=sample_digest(path))
    elif path.suffix == ".npy":
        dtype, shape = npy_header(path)
        record.update(dtype=dtype, shape=list(shape), sample_sha256=sample_digest(path))
    elif path.suffix in SAMPLED_SUFFIXES:
        record["sample_sha256"] = sample_digest(path)
    return record


def sha256_file(path: str | Path) -> str:
    """The sha256 hex digest of the file at ``path``, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def sample_digest(path: str | Path) -> str:
    """sha256 of :data:`SAMPLE_BLOCKS` blocks of :data:`SAMPLE_BLOCK` bytes spread evenly over the file
    (the whole file when it is smaller): what loading checks of an array, at the cost of a few reads."""
    size = os.path.getsize(path)
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        if size <= SAMPLE_BLOCKS * SAMPLE_BLOCK:
            digest.update(fh.read())
        else:
            last = size - SAMPLE_BLOCK  # the first block holds the .npy header, the last ends the file
            for i in range(SAMPLE_BLOCKS):
                digest.update(os.pread(fh.fileno(), SAMPLE_BLOCK, i * last // (SAMPLE_BLOCKS - 1)))
    return digest.hexdigest()


def npy_header(path: Path) -> tuple[str, tuple[int, ...]]:
    """``(dtype, shape)`` from an ``.npy`` header; IndexFormatError when there is none."""
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(fh)
    except (ValueError, OSError, EOFError) as exc:
        raise IndexFormatError(damaged(path, f"not a .npy array ({exc})", path.parent)) from exc
    return str(dtype), tuple(int(n) for n in shape)


def _walk(directory: Path, under: str | None = None) -> Iterable[str]:
    root = directory / under if under else directory
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(directory)
        dirnames[:] = sorted(d for d in dirnames if not (rel == Path(".") and d in UNLISTED))
        for name in sorted(filenames):
            path = (rel / name).as_posix()
            if path != MANIFEST:
                yield path


def file_records(directory: str | Path, under: str | None = None) -> dict[str, dict[str, Any]]:
    """Records of every file in ``directory`` (or its subfolder ``under``), except the
    manifest and ``cache/``; keys are ``/``-separated relative paths, sorted."""
    directory = Path(directory)
    return {rel: file_record(directory / rel) for rel in _walk(directory, under)}
