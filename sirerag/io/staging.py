"""Builds as transactions: stage every index file beside the index, then swap it in.

:func:`staged_index` takes the folder's write lock (:mod:`sirerag.io.lock`), checks that
``--out`` may be written (missing, empty, or a sirerag index holding only what sirerag
wrote), and yields an empty staging folder ``.<name>.stage-XXXXXXXX`` beside it. When
the build returns, the folder's ``cache/`` (the default home of the model-call caches,
which a killed build must keep) is moved into the staged folder and the staged folder
replaces the index in one swap. Readers see the old index or the new one, never a mix;
files of an earlier build that this build did not write (propositions, graph/, colbert/,
...) are gone with the old folder. A build killed at any point leaves the old index as
it was; the next writer puts a cache left in a staging folder back and deletes the rest.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Iterator

from sirerag.errors import ConfigError, IndexFormatError
from sirerag.io.files import make_temp_dir, swap_dir
from sirerag.io.lock import index_lock
from sirerag.io.manifest import MANIFEST, UNLISTED, parse_manifest

logger = logging.getLogger(__name__)

#: Top-level names an index of format 1 could hold (its manifest did not list its files).
LEGACY_NAMES = frozenset({MANIFEST, "entries.jsonl", "embeddings.npy", "documents.jsonl", "chunks.jsonl",
                          "propositions.jsonl", "extraction_failures.jsonl", "rewrites.jsonl", "graph", "colbert"})
_OUR_TEMP = re.compile(r"^\..+\.(tmp-[0-9a-f]{8}|[A-Za-z0-9_]+\.tmp)$")


def checkpoint(point: str) -> None:
    """Called at each step of a commit (``carry``, ``swap``, ``swapped``); does nothing.
    Tests replace it to stop a build at a named point."""


def refuse_special(path: str | Path, option: str = "--out") -> Path:
    """Refuse ``/``, the home folder and the current folder (and an existing file) as a folder to replace."""
    path = Path(path).expanduser()
    resolved = path.resolve()
    for special, what in ((Path(resolved.anchor), "the file-system root"), (Path.home().resolve(), "your home folder"),
                          (Path.cwd().resolve(), "the current folder")):
        if resolved == special:
            raise ConfigError(f"{option} {path} is {what}; sirerag replaces the whole folder, choose a new one")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path} is an existing file, not a folder; choose a folder to create")
    return path


def check_index_out(out: str | Path, *, keep: tuple[str, ...] = UNLISTED) -> None:
    """Check that a build may replace ``out``: missing, empty, or a sirerag index whose
    folder holds only files sirerag wrote (the files its manifest lists, ``cache/``).

    Raises:
        ConfigError: ``/``, the home or current folder, a file, a folder that is not a
            sirerag index, or an index folder holding other files (named in the message).
    """
    out = refuse_special(out)
    if not out.exists():
        return
    names = {p.name for p in out.iterdir()}
    allowed = set(keep)
    if MANIFEST in names:
        try:
            manifest = parse_manifest(out)
        except IndexFormatError as exc:
            raise ConfigError(f"--out {out} is not a sirerag index ({exc}); choose a new or empty folder") from None
        files = manifest.get("files")
        allowed |= {MANIFEST} | ({rel.split("/")[0] for rel in files} if isinstance(files, dict) else LEGACY_NAMES)
    foreign = sorted(n for n in names - allowed if not _OUR_TEMP.match(n))
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        kind = "a sirerag index that also holds" if MANIFEST in names else "not a sirerag index; it holds"
        raise ConfigError(f"--out {out} is {kind} files sirerag did not write ({shown}); a build replaces the "
                          "whole folder: choose a new or empty folder, or move those files")


def recover(out: Path, keep: tuple[str, ...] = UNLISTED) -> None:
    """Clean up after a writer killed while committing (call it under the lock): put a
    cache left in a staging folder back into ``out``, put back an index renamed away by
    an interrupted two-step swap, and delete the other leftovers."""
    leftovers = sorted(out.parent.glob(f".{out.name}.stage-*")) + sorted(out.parent.glob(f".{out.name}.old-*"))
    for folder in leftovers:
        if not folder.is_dir():
            continue
        if ".old-" in folder.name and not out.exists():
            os.rename(folder, out)
            logger.warning("put back %s, left by an interrupted swap", out)
            continue
        stuck = []
        for name in keep:
            if (folder / name).exists():
                if (out / name).exists():
                    stuck.append(name)
                    continue
                out.mkdir(parents=True, exist_ok=True)
                os.rename(folder / name, out / name)
                logger.info("recovered %s from an interrupted build", out / name)
        if stuck:
            logger.warning("left %s in place: it holds %s and so does %s", folder, ", ".join(stuck), out)
        else:
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def staged_index(out: str | Path, *, command: str = "build", keep: tuple[str, ...] = UNLISTED) -> Iterator[Path]:
    """Hold ``out``'s lock and yield an empty staging folder; on success it replaces ``out``.

    Args:
        out: the index folder to (re)write.
        command: shown to a second writer that finds the lock taken.
        keep: top-level folders of ``out`` moved into the new index (the caches).

    Raises:
        ConfigError: ``out`` may not be replaced (see :func:`check_index_out`).
        IndexLockedError: another process is writing ``out``.
    """
    out = Path(out).expanduser()
    check_index_out(out, keep=keep)
    with index_lock(out, command):
        recover(out, keep)
        check_index_out(out, keep=keep)
        stage = make_temp_dir(out, "stage")
        carried: list[str] = []
        swapped = False
        try:
            yield stage
            checkpoint("carry")
            for name in keep:
                if (out / name).exists():
                    os.rename(out / name, stage / name)
                    carried.append(name)
            checkpoint("swap")
            old = swap_dir(stage, out)
            swapped = True
            checkpoint("swapped")
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if not swapped:
                for name in carried:  # the swap failed: the caches go back where they were
                    os.rename(stage / name, out / name)
                shutil.rmtree(stage, ignore_errors=True)
