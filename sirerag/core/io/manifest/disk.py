"""Reading, writing and checking ``manifest.json`` against the files of an index."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from sirerag import __version__
from sirerag.core.errors import IndexFormatError, InputError
from sirerag.core.io.checksums import MANIFEST, file_record, file_records, sample_digest
from sirerag.core.io.contained import Folder, check_inside, field_name
from sirerag.core.io.files import damaged, read_json, write_json
from sirerag.core.io.manifest.model import Manifest
from sirerag.core.io.manifest.records import FORMAT_MARKER, FORMAT_VERSION, HEADER, FileRecord


def check_sample(directory: str | Path, manifest: Manifest, rel: str) -> None:
    """Check an array file against the sample checksum its manifest record holds (manifests written
    before it have none: nothing to check). IndexFormatError naming the file when it differs."""
    record = manifest.files.get(rel)
    if record is None or record.sample_sha256 is None:
        return
    path = Path(directory) / rel
    try:
        actual = sample_digest(path)
    except OSError as exc:
        raise IndexFormatError(damaged(path, f"unreadable ({exc.strerror})", directory)) from None
    if actual != record.sample_sha256:
        raise IndexFormatError(damaged(path, "content does not match the manifest's sample checksum (changed or "
                                             "damaged, same size)", directory))


def commit_id(manifest: Manifest) -> str:
    """The commit an index's manifest records: sha256 over the records (size, sha256) of its files,
    ColBERT indexes added in place later left out. Two loads of the same commit have the same id."""
    files = {rel: (rec.size, rec.sha256) for rel, rec in sorted(manifest.files.items())
             if not rel.startswith("colbert/")}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def write_manifest(directory: str | Path, manifest: Manifest | None = None,
                   **content: Any) -> Manifest:  # Any: JSON values
    """Write ``manifest.json`` (the format marker and versions first, ``files`` last), listing every file
    now in ``directory``; call it after every other file is written. The sections are those of ``manifest``
    (a manifest read back, for an update) with the fields of ``content`` (JSON values) over them; the
    :data:`HEADER` fields are written anew."""
    directory = Path(directory)
    data = {**(manifest.to_dict() if manifest is not None else {}), **content}
    for key in HEADER:  # written here: the copies of a manifest read back (an update) are replaced
        data.pop(key, None)
    written = Manifest.from_dict({"format": FORMAT_MARKER, "format_version": FORMAT_VERSION,
                                  "sirerag_version": __version__, **data, "files": file_records(directory)},
                                 source=directory / MANIFEST)
    write_json(directory / MANIFEST, written.to_dict())
    return written


def rewrite_manifest(directory: str | Path, manifest: Manifest) -> Manifest:
    """Write ``manifest`` as it is (its file records kept): a component recorded in an index in place."""
    write_json(Path(directory) / MANIFEST, manifest.to_dict())
    return manifest


def refresh_files(directory: str | Path, manifest: Manifest, under: str) -> Manifest:
    """Re-record the files under the subfolder ``under`` (a component added later) and
    write the manifest; the records of the other files are kept as they were."""
    directory = Path(directory)
    prefix = under.rstrip("/") + "/"
    files = {k: v for k, v in manifest.files.items() if not k.startswith(prefix)}
    files.update({rel: FileRecord.from_dict(rec) for rel, rec in file_records(directory, under).items()})
    manifest.files = dict(sorted(files.items()))
    return rewrite_manifest(directory, manifest)


def parse_manifest(directory: str | Path) -> Manifest:
    """The manifest, whatever its version (of another version: its header and files only);
    IndexFormatError when it is missing, not JSON, not written by sirerag (no format marker and no
    ``format_version``, or another ``format``), a field is not of its type or a path it lists leaves the
    index folder (the message names the field)."""
    manifest = Manifest.from_dict(_raw(directory), source=Path(directory) / MANIFEST)
    check_paths(directory, manifest)
    return manifest


def check_paths(directory: str | Path, manifest: Manifest) -> None:
    """Every path the manifest lists (``files``, ``components.NAME.path``, a ColBERT index's ``path``) must
    lie inside ``directory``: IndexFormatError naming the field of the first that leaves it (absolute, ``..``
    or through a symlink out of the folder)."""
    source, folder = Path(directory) / MANIFEST, Folder(directory)
    for rel in manifest.files:
        check_inside(folder, rel, f"{source}: {field_name('files', rel)}")
    for name, component in manifest.components.items():
        where = f"{source}: components.{name}"
        if component.path is not None:
            check_inside(folder, component.path, f"{where}.path")
        for key, record in component.indexes.items():
            if "path" in record:
                check_inside(folder, record["path"], f"{where}.{field_name('indexes', key)}.path")


def listed_names(directory: str | Path) -> set[str] | None:
    """The top-level names of the files a sirerag manifest lists (any version, whatever else it holds: what
    the output guard lets a build replace); None when it lists none (format 1). IndexFormatError when the
    folder holds no sirerag manifest."""
    files = _raw(directory).get("files")
    return {str(rel).split("/")[0] for rel in files} if isinstance(files, dict) else None


def _raw(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise IndexFormatError(f"{directory} is not a sirerag index: {MANIFEST} is missing")
    try:
        data = read_json(path)
    except InputError as exc:
        raise IndexFormatError(f"{exc}; not a sirerag index manifest") from exc
    if not isinstance(data, dict) or not (data.get("format") == FORMAT_MARKER or (
            isinstance(data.get("format_version"), int) and "sirerag_version" in data)):
        raise IndexFormatError(f"{path}: not a sirerag index manifest (no \"format\": \"{FORMAT_MARKER}\")")
    if "format" in data and data["format"] != FORMAT_MARKER:  # a marker of another tool: never read or updated
        shown = json.dumps(data["format"], ensure_ascii=False)[:60]
        raise IndexFormatError(f"{path}: unknown format {shown} (format_version {data.get('format_version')!r}); "
                               f"not a sirerag index manifest (sirerag reads \"format\": \"{FORMAT_MARKER}\", "
                               f"format_version {FORMAT_VERSION})")
    return data


def read_manifest(directory: str | Path) -> Manifest:
    """Read and check ``manifest.json``.

    Raises:
        IndexFormatError: missing, not a sirerag manifest, of another format version (the message
            says to rebuild) or with a field of the wrong type (the message names it).
    """
    manifest = parse_manifest(directory)
    path = Path(directory) / MANIFEST
    version = manifest.format_version
    if version != FORMAT_VERSION:
        age = "an older" if version < FORMAT_VERSION else "another"
        raise IndexFormatError(
            f"{path}: format_version {version!r} is not supported by sirerag {__version__} (it reads format "
            f"{FORMAT_VERSION}; the index was written by {age} sirerag): rebuild the index with this version "
            f"(sirerag build CORPUS --out {directory})"
        )
    if not manifest.lists_files:
        raise IndexFormatError(damaged(path, "the manifest lists no files", directory))
    return manifest


def check_files(directory: str | Path, manifest: Manifest, *, hashes: bool = False,
                names: Iterable[str] | None = None) -> None:
    """Check that the files the manifest lists are there with their recorded size (and
    sha256 when ``hashes``); ``names`` limits the check to some of them.

    Raises:
        IndexFormatError: naming the first file that is missing, truncated, grown or changed.
    """
    directory = Path(directory)
    for rel in (names if names is not None else manifest.files):
        record = manifest.files.get(rel)
        if record is None:
            continue
        path = directory / rel
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise IndexFormatError(damaged(path, "file listed in the manifest is missing", directory)) from None
        if size != record.size:
            raise IndexFormatError(damaged(path, f"size {size} bytes, the manifest says {record.size} "
                                                 "(truncated or changed)", directory))
        if hashes and file_record(path)["sha256"] != record.sha256:
            raise IndexFormatError(damaged(path, "content does not match the manifest's sha256 (changed or damaged)",
                                           directory))


def sha256_matches(directory: str | Path, manifest: Manifest, rel: str, data: bytes) -> None:
    """Check bytes read from ``rel`` against the manifest's record (size and sha256)."""
    record = manifest.files.get(rel)
    if record is None:
        return
    if len(data) != record.size or hashlib.sha256(data).hexdigest() != record.sha256:
        raise IndexFormatError(damaged(
            Path(directory) / rel, "content does not match the manifest (damaged, or the index was rebuilt "
            "since it was loaded: load it again)", directory))
