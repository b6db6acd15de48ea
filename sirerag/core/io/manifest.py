"""``manifest.json``: the commit record of an index directory.

The manifest is written last, into the staged folder, and lists every file of the
index (``files``: path -> size, sha256, and row count for ``.jsonl`` or dtype, shape
and a sample checksum for ``.npy``). Loading checks sizes and array samples (cheap);
:func:`commit_id` names the commit a reader loaded; :func:`check_files` with
``hashes=True`` (``sirerag verify``) checks every byte. ``cache/`` is not part of
the index: it is kept across rebuilds and never listed.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from sirerag import __version__
from sirerag.core.errors import IndexFormatError, InputError
from sirerag.core.io.files import damaged, read_json, write_json

#: Version of the index directory layout; bump on incompatible changes
#: (2: the manifest lists every file with its size and sha256).
FORMAT_VERSION = 2
#: The marker that says a manifest was written by sirerag.
FORMAT_MARKER = "sirerag-index"
MANIFEST = "manifest.json"
#: The fields :func:`write_manifest` writes itself (format marker, versions, file records).
HEADER = ("format", "format_version", "sirerag_version", "files")
#: Top-level folders of an index directory that are not part of the index (kept across rebuilds).
UNLISTED = ("cache",)
_CHUNK = 1 << 20
#: blocks read for the sample checksum of an array file (64 x 4 KiB: cheap next to loading it)
SAMPLE_BLOCKS = 64
SAMPLE_BLOCK = 4096


def file_record(path: str | Path) -> dict[str, Any]:
    """Size, sha256 and (``.jsonl``) line count or (``.npy``) dtype and shape of one file."""
    path = Path(path)
    digest, size, lines = hashlib.sha256(), 0, 0
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
            size += len(block)
            lines += block.count(b"\n")
    record: dict[str, Any] = {"size": size, "sha256": digest.hexdigest()}
    if path.suffix == ".jsonl":
        record["rows"] = lines
    elif path.suffix == ".npy":
        dtype, shape = npy_header(path)
        record.update(dtype=dtype, shape=list(shape), sample_sha256=sample_digest(path))
    return record


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


def check_sample(directory: str | Path, manifest: dict[str, Any], rel: str) -> None:
    """Check an array file against the sample checksum its manifest record holds (manifests written
    before it have none: nothing to check). IndexFormatError naming the file when it differs."""
    record = manifest.get("files", {}).get(rel)
    expected = record.get("sample_sha256") if isinstance(record, dict) else None
    if expected is None:
        return
    path = Path(directory) / rel
    try:
        actual = sample_digest(path)
    except OSError as exc:
        raise IndexFormatError(damaged(path, f"unreadable ({exc.strerror})", directory)) from None
    if actual != expected:
        raise IndexFormatError(damaged(path, "content does not match the manifest's sample checksum (changed or "
                                             "damaged, same size)", directory))


def commit_id(manifest: dict[str, Any]) -> str:
    """The commit an index's manifest records: sha256 over the records (size, sha256) of its files,
    ColBERT indexes added in place later left out. Two loads of the same commit have the same id."""
    files = {rel: (rec.get("size"), rec.get("sha256")) for rel, rec in sorted(manifest.get("files", {}).items())
             if isinstance(rec, dict) and not rel.startswith("colbert/")}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


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


def write_manifest(directory: str | Path, **content: Any) -> dict[str, Any]:
    """Write ``manifest.json`` (the format marker and versions first, ``files`` last),
    listing every file now in ``directory``. Call it after every other file is written.
    ``content`` may be a manifest read back: its :data:`HEADER` fields are written anew."""
    directory = Path(directory)
    for key in HEADER:  # written here: the copies of a manifest read back (an update) are replaced
        content.pop(key, None)
    manifest = {"format": FORMAT_MARKER, "format_version": FORMAT_VERSION, "sirerag_version": __version__,
                **content, "files": file_records(directory)}
    write_json(directory / MANIFEST, manifest)
    return manifest


def refresh_files(directory: str | Path, manifest: dict[str, Any], under: str) -> dict[str, Any]:
    """Re-record the files under the subfolder ``under`` (a component added later) and
    write the manifest; the records of the other files are kept as they were."""
    directory = Path(directory)
    prefix = under.rstrip("/") + "/"
    files = {k: v for k, v in manifest.get("files", {}).items() if not k.startswith(prefix)}
    files.update(file_records(directory, under))
    manifest["files"] = dict(sorted(files.items()))
    write_json(directory / MANIFEST, manifest)
    return manifest


def parse_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest as a dict, whatever its version; IndexFormatError when it is missing,
    not JSON or not written by sirerag (no format marker and no ``format_version``)."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise IndexFormatError(f"{directory} is not a sirerag index: {MANIFEST} is missing")
    try:
        manifest = read_json(path)
    except InputError as exc:
        raise IndexFormatError(f"{exc}; not a sirerag index manifest") from exc
    if not isinstance(manifest, dict) or not (manifest.get("format") == FORMAT_MARKER or (
            isinstance(manifest.get("format_version"), int) and "sirerag_version" in manifest)):
        raise IndexFormatError(f"{path}: not a sirerag index manifest (no \"format\": \"{FORMAT_MARKER}\")")
    return manifest


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """Read and check ``manifest.json``.

    Raises:
        IndexFormatError: missing, not a sirerag manifest, or of another format version
            (the message says to rebuild).
    """
    manifest = parse_manifest(directory)
    path = Path(directory) / MANIFEST
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        age = "an older" if isinstance(version, int) and version < FORMAT_VERSION else "another"
        raise IndexFormatError(
            f"{path}: format_version {version!r} is not supported by sirerag {__version__} (it reads format "
            f"{FORMAT_VERSION}; the index was written by {age} sirerag): rebuild the index with this version "
            f"(sirerag build CORPUS --out {directory})"
        )
    if not isinstance(manifest.get("files"), dict):
        raise IndexFormatError(damaged(path, "the manifest lists no files", directory))
    return manifest


def check_files(directory: str | Path, manifest: dict[str, Any], *, hashes: bool = False,
                names: Iterable[str] | None = None) -> None:
    """Check that the files the manifest lists are there with their recorded size (and
    sha256 when ``hashes``); ``names`` limits the check to some of them.

    Raises:
        IndexFormatError: naming the first file that is missing, truncated, grown or changed.
    """
    directory = Path(directory)
    files = manifest.get("files", {})
    for rel in (names if names is not None else files):
        record = files.get(rel)
        if record is None:
            continue
        path = directory / rel
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise IndexFormatError(damaged(path, "file listed in the manifest is missing", directory)) from None
        if size != record.get("size"):
            raise IndexFormatError(damaged(path, f"size {size} bytes, the manifest says {record.get('size')} "
                                                 "(truncated or changed)", directory))
        if hashes and file_record(path)["sha256"] != record.get("sha256"):
            raise IndexFormatError(damaged(path, "content does not match the manifest's sha256 (changed or damaged)",
                                           directory))


def sha256_matches(directory: str | Path, manifest: dict[str, Any], rel: str, data: bytes) -> None:
    """Check bytes read from ``rel`` against the manifest's record (size and sha256)."""
    record = manifest.get("files", {}).get(rel)
    if record is None:
        return
    if len(data) != record.get("size") or hashlib.sha256(data).hexdigest() != record.get("sha256"):
        raise IndexFormatError(damaged(
            Path(directory) / rel, "content does not match the manifest (damaged, or the index was rebuilt "
            "since it was loaded: load it again)", directory))
