"""The output guard: one rule for every path a command writes.

Every writing command (build, add/remove, export, inspect, data convert, ``eval --json/--run/--plot``,
``compare --plot``, ``build --dry-run --json``, ``--cache``) checks its outputs here before any work:

* symlinks are resolved first, and the resolved path is what gets written (a link to an
  earlier export stays a link; its target is replaced);
* only what sirerag wrote itself is replaced: an index (its manifest lists its files), an
  export (``export.json`` lists its files), a converted dataset (``.sirerag-dataset.json``
  lists its files) or a file sirerag wrote (a report, an eval result, a run or a plot,
  recognised by the marker each carries; an empty file holds nothing and may be replaced);
* nothing is written inside an index (except its own ``cache/``), over an input of the same
  command, or as ``/``, the home folder or the current folder;
* everything else is refused with one line naming the flag and the path
  (:class:`~sirerag.core.errors.ConfigError`).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from sirerag.core.errors import ConfigError, IndexFormatError
from sirerag.core.io.contained import Folder, check_inside, field_name
from sirerag.core.io.manifest import MANIFEST, UNLISTED, listed_names
from sirerag.core.io.markers import GENERATOR, written_by_sirerag

#: The marker file of a folder written by ``sirerag data convert``.
DATASET_MARKER = ".sirerag-dataset.json"
EXPORT_MANIFEST = "export.json"
EXPORT_FORMATS = ("beir", "colbert", "jsonl", "parquet")
#: Top-level names an index of format 1 could hold (its manifest did not list its files).
LEGACY_NAMES = frozenset({MANIFEST, "entries.jsonl", "embeddings.npy", "documents.jsonl", "chunks.jsonl",
                          "propositions.jsonl", "extraction_failures.jsonl", "rewrites.jsonl", "graph", "colbert"})
__all__ = ["DATASET_MARKER", "GENERATOR", "check_cache_dir", "check_dataset_out", "check_export_out",
           "check_file_out", "check_file_outs", "check_index_out", "refuse_special", "resolve", "written_by_sirerag"]

_OUR_TEMP = re.compile(r"^\..+\.(tmp-[0-9a-f]{8}|[A-Za-z0-9_]+\.tmp)$")


def resolve(path: str | Path) -> Path:
    """``path`` with ``~`` expanded and every symlink resolved (what is really written)."""
    return Path(path).expanduser().resolve()


def refuse_special(path: str | Path, option: str = "--out", command: str = "") -> Path:
    """Refuse ``/``, the home folder and the current folder (and an existing file) as a folder to
    replace; returns the resolved path. ``command``: an update (``add``, ``remove``) of the index there."""
    shown = Path(path).expanduser()
    resolved = resolve(path)
    _refuse_special_folder(resolved, shown, option, f"sirerag {command} replaces the whole folder: run it from "
                           "outside the index" if command else "sirerag replaces the whole folder, choose a new one")
    if resolved.exists() and not resolved.is_dir():
        raise ConfigError(f"{option} {shown} is an existing file, not a folder; choose a folder to create")
    return resolved


def _refuse_special_folder(resolved: Path, shown: Any, option: str, advice: str) -> None:
    """ConfigError when ``resolved`` is ``/``, the home folder or the current folder."""
    for special, what in ((Path(resolved.anchor), "the file-system root"), (Path.home().resolve(), "your home folder"),
                          (Path.cwd().resolve(), "the current folder")):
        if resolved == special:
            raise ConfigError(f"{option} {shown} is {what}; {advice}")


def is_index(folder: Path) -> bool:
    """Whether ``folder`` holds a sirerag index manifest (any format version)."""
    if not (folder / MANIFEST).is_file():
        return False
    try:
        listed_names(folder)
    except IndexFormatError:
        return False
    return True


def enclosing_index(path: Path) -> Path | None:
    """The sirerag index folder ``path`` (resolved) lies in, or None; ``path`` itself is not counted."""
    for parent in path.parents:
        if is_index(parent):
            return parent
    return None


def _refuse_in_index(path: Path, shown: Any, option: str) -> None:
    index = enclosing_index(path)
    if index is not None:
        raise ConfigError(f"{option} {shown} is inside the index {index}; sirerag never writes into an index "
                          "(choose a path outside it)")


def _refuse_inputs(path: Path, shown: Any, option: str, inputs: Iterable[str | Path | None], *, folder: bool) -> None:
    """``path`` may not be an input, lie inside an input folder, or (a folder) hold an input."""
    for given in inputs:
        if given is None:
            continue
        src = resolve(given)
        if path == src or src in path.parents or (folder and path in src.parents):
            where = "is" if path == src else "is inside" if src in path.parents else "holds"
            raise ConfigError(f"{option} {shown} {where} the input {given} of this command; write the output "
                              "somewhere else")


def check_file_out(path: str | Path, option: str, *, inputs: Iterable[str | Path | None] = (),
                   others: Iterable[str | Path | None] = ()) -> Path:
    """Check a file output (a report, an eval result, a run, a plot) before any work.

    Args:
        path: the file to write.
        option: the flag it came from (shown in the message).
        inputs: the command's inputs (files or folders); the output may not be one or lie in one.
        others: the command's other outputs; the output may not be one of them.

    Returns:
        The resolved path: write there (a symlink to an earlier output stays a symlink).

    Raises:
        ConfigError: the path is a folder, inside an index, an input or another output, or an
            existing file sirerag did not write.
    """
    shown = path
    resolved = resolve(path)
    if resolved.is_dir():
        raise ConfigError(f"{option} {shown} is a folder; give a file name")
    _refuse_in_index(resolved, shown, option)
    _refuse_inputs(resolved, shown, option, inputs, folder=False)
    for other in others:
        if other is not None and resolve(other) == resolved:
            raise ConfigError(f"{option} {shown} is also another output of this command; give each its own file")
    if resolved.exists() and not written_by_sirerag(resolved):
        raise ConfigError(f"{option} {shown}: refusing to replace a file sirerag did not write; choose a new "
                          "file name or move it")
    return resolved


def _foreign(names: Iterable[str], allowed: set[str]) -> list[str]:
    return sorted(n for n in names if n not in allowed and not _OUR_TEMP.match(n))


def _shown(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def check_index_out(out: str | Path, *, keep: tuple[str, ...] = UNLISTED, option: str = "--out",
                    inputs: Iterable[str | Path | None] = (), command: str = "build") -> Path:
    """Check that a build may replace ``out``: missing, empty, or a sirerag index whose folder
    holds only files sirerag wrote (the files its manifest lists, ``keep`` folders such as
    ``cache/``), not inside another index and holding no input. Returns the resolved path.
    ``option`` and ``command`` name the argument and the command in messages (an update: the
    index argument of ``add``/``remove``).

    Raises:
        ConfigError: ``/``, the home or current folder, a file, a folder that is not a sirerag
            index, an index folder holding other files (named in the message), inside an index,
            or an input.
    """
    resolved = refuse_special(out, option, "" if command == "build" else command)
    _refuse_in_index(resolved, out, option)
    _refuse_inputs(resolved, out, option, inputs, folder=True)
    if not resolved.exists():
        return resolved
    names = {p.name for p in resolved.iterdir()}
    allowed = set(keep)
    if MANIFEST in names:
        try:
            listed = listed_names(resolved)
        except IndexFormatError as exc:
            raise ConfigError(f"{option} {out} is not a sirerag index ({exc}); choose a new or empty folder") from None
        allowed |= {MANIFEST} | (listed if listed is not None else LEGACY_NAMES)
    foreign = _foreign(names, allowed)
    if foreign:
        kind = "a sirerag index that also holds" if MANIFEST in names else "not a sirerag index; it holds"
        advice = ("a build replaces the whole folder: choose a new or empty folder, or move those files"
                  if command == "build" else f"sirerag {command} replaces the whole folder: move those files out of it")
        raise ConfigError(f"{option} {out} is {kind} files sirerag did not write ({_shown(foreign)}); {advice}")
    return resolved


def _listed(info: Any, key: str = "files") -> list[str] | None:
    listed = info.get(key) if isinstance(info, dict) else None
    if isinstance(listed, list) and all(isinstance(f, str) for f in listed):
        return listed
    return None


def _read_marker(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def _only_listed(folder: Path, listed: list[str], marker: str, shown: Any, option: str) -> None:
    inside = Folder(folder)
    for rel in listed:  # what it lists lies inside it, or the marker is not sirerag's
        check_inside(inside, rel, f"{option} {shown}: {marker}: {field_name('files', rel)}",
                     what="the folder", error=ConfigError)
    present = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir())
    allowed = set(listed) | {marker}
    folders = {Path(f).parent.as_posix() for f in allowed} | {"."}
    foreign = [f for f in present if f not in allowed and not _OUR_TEMP.match(Path(f).name)]
    foreign += sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                      if p.is_dir() and p.relative_to(folder).as_posix() not in folders)
    if foreign:
        raise ConfigError(f"{option} {shown} holds files its {marker} does not list ({_shown(foreign)}); "
                          "sirerag replaces only what it wrote: move them or choose a new folder")


def check_export_out(out: str | Path, source: str | Path, *, overwrite: bool, option: str = "--out") -> Path:
    """``out`` must be missing, empty, or (with ``overwrite``) an earlier export holding only the
    files its ``export.json`` lists; never the source index, inside an index, or around the source.
    Returns the resolved path."""
    resolved = refuse_special(out, option)
    src = resolve(source)
    if resolved == src or src in resolved.parents or resolved in src.parents:
        raise ConfigError(f"{option} {out} is the source index, inside it or around it ({source}); "
                          "choose a folder outside the index")
    _refuse_in_index(resolved, out, option)
    if not resolved.exists() or not any(resolved.iterdir()):
        return resolved
    info = _read_marker(resolved / EXPORT_MANIFEST)
    listed = _listed(info)
    if not (listed is not None and info.get("format") in EXPORT_FORMATS and "sirerag_version" in info):
        raise ConfigError(f"{option} {out} exists and is not a sirerag export (no valid {EXPORT_MANIFEST}); "
                          "choose a new folder")
    _only_listed(resolved, listed, EXPORT_MANIFEST, out, option)
    if not overwrite:
        raise ConfigError(f"{option} {out} already holds an export; pass overwrite=True (--overwrite) to replace it")
    return resolved


def check_dataset_out(out: str | Path, *, inputs: Iterable[str | Path | None] = (), option: str = "--out") -> Path:
    """``out`` of ``data convert``: missing, empty, or a folder an earlier conversion wrote (its
    :data:`DATASET_MARKER` lists every file in it); never around, inside or equal to an input, and
    never inside an index. Returns the resolved path."""
    resolved = refuse_special(out, option)
    _refuse_in_index(resolved, out, option)
    _refuse_inputs(resolved, out, option, inputs, folder=True)
    if not resolved.exists() or not any(resolved.iterdir()):
        return resolved
    info = _read_marker(resolved / DATASET_MARKER)
    listed = _listed(info)
    if listed is None or not str(info.get("generator", "")).startswith("sirerag"):
        present = sorted(p.name for p in resolved.iterdir())
        raise ConfigError(f"{option} {out} holds files sirerag did not write ({_shown(present)}); a conversion "
                          "replaces the whole folder: choose a new or empty folder")
    _only_listed(resolved, listed, DATASET_MARKER, out, option)
    return resolved


def dataset_marker(files: Iterable[str], **info: Any) -> dict[str, Any]:  # Any: JSON values
    """The content of :data:`DATASET_MARKER` for a folder holding ``files`` (relative paths)."""
    return {"generator": GENERATOR, **info, "files": sorted(files)}


def check_cache_dir(cache: str | Path, *, index: str | Path | None = None, option: str = "--cache") -> Path:
    """A ``--cache`` folder may not be ``/``, the home folder or the current folder, nor lie inside an
    index, except in its ``cache/`` folder (and, for the index ``index`` being written, in a top folder
    its manifest does not list). Returns the resolved path.

    Raises:
        ConfigError: the folder is ``/``, the home or current folder, an index, a file, or inside an
            index's own files.
    """
    resolved = resolve(cache)
    _refuse_special_folder(resolved, Path(cache).expanduser(), option,
                           "sirerag writes its caches there: give a folder of their own")
    if resolved.exists() and not resolved.is_dir():
        raise ConfigError(f"{option} {cache} is a file; give a folder for the caches")
    if is_index(resolved):
        raise ConfigError(f"{option} {cache} is an index folder; give a folder outside it or its cache/ folder")
    own = resolve(index) if index is not None else None
    for parent in resolved.parents:
        if not is_index(parent):
            continue
        top = resolved.relative_to(parent).parts[0]
        if top in UNLISTED:
            return resolved
        listed = parent_files(parent)
        if parent == own and top not in listed:
            return resolved
        raise ConfigError(f"{option} {cache} is inside the index {parent}; use its cache/ folder or a folder "
                          "outside the index")
    return resolved


def parent_files(index: Path) -> set[str]:
    """Top-level names the manifest of ``index`` lists."""
    try:
        listed = listed_names(index)
    except IndexFormatError:
        return set(LEGACY_NAMES)
    return listed | {MANIFEST} if listed is not None else set(LEGACY_NAMES)


def check_file_outs(outputs: Mapping[str, str | Path | None], *,
                    inputs: Iterable[str | Path | None] = ()) -> dict[str, Path | None]:
    """:func:`check_file_out` for each ``{option: path or None}`` of one command (each also against
    the others); returns ``{option: resolved path or None}``."""
    inputs = [i for i in inputs if i is not None]
    given = {option: path for option, path in outputs.items() if path is not None}
    checked: dict[str, Path | None] = {option: None for option in outputs}
    for option, path in given.items():
        others = [p for o, p in given.items() if o != option]
        checked[option] = check_file_out(path, option, inputs=inputs, others=others)
    return checked
