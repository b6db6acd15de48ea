"""Which files a folder corpus reads, and which documents of an index came from a folder.

:func:`scan_folder` walks a folder for ``.txt``/``.md`` files (sorted by relative path) and skips, with
a count in the log:

* hidden entries: a file or folder whose name starts with ``.`` (``.git/``, ``.env``, ``.venv/``), and a
  symbolic link that leads to one (INFO: a repository's ``.git`` is expected);
* symbolic links whose real path lies outside the folder, file or folder, unless
  ``follow_outside_links`` (one WARNING; a folder corpus reads no file of the machine it was not given).
  A link to a folder inside the corpus is not followed: its files are read at their own path;
* files whose name is not UTF-8 text or holds a control character: no id can be made of it (one
  WARNING naming them).

A folder's documents record their file as ``FOLDER/RELATIVE/PATH`` (:func:`folder_source`) in
``Document.source``; :func:`stale_folder_ids` reads that record, never the id, to tell which documents
of an index a folder gave.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from sirerag.core.errors import InputError
from sirerag.core.types import Document

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".md")
#: a file name no document id can be made of: control characters (tab and newline too) and the lone
#: surrogates Python decodes bytes that are not UTF-8 to
_UNUSABLE_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: at most this many skipped entries are named in a warning
_NAMED = 5


@dataclass
class FolderScan:
    """The files a folder corpus reads (relative POSIX paths, sorted) and what it skipped."""

    folder: Path
    files: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    bad_names: list[str] = field(default_factory=list)

    def report(self) -> None:
        """Log what was skipped: one line per kind."""
        if self.hidden:
            logger.info("%s: skipped %d hidden file(s) or folder(s) (names starting with '.'), e.g. %s",
                        self.folder, len(self.hidden), shown_names(self.hidden))
        if self.outside:
            logger.warning("%s: skipped %d symbolic link(s) whose real path lies outside the folder: %s "
                           "(corpus.follow_outside_links, --follow-outside-links, reads them)",
                           self.folder, len(self.outside), shown_names(self.outside))
        if self.bad_names:
            logger.warning("%s: skipped %d file(s) whose name is not UTF-8 text or holds a control "
                           "character (no document id can be made of it): %s", self.folder, len(self.bad_names),
                           shown_names(self.bad_names))


def shown_names(names: list[str]) -> str:
    """The first few of ``names``, and how many more."""
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return ", ".join(names[:_NAMED]) + more


def scan_folder(folder: str | Path, *, follow_outside_links: bool = False) -> FolderScan:
    """Walk ``folder`` for the ``.txt``/``.md`` files a folder corpus reads (see the module).

    Raises:
        InputError: a folder of the corpus cannot be listed (named).
    """
    folder = Path(folder)
    scan = FolderScan(folder)
    root = folder.resolve()
    _walk(scan, root, folder, (), follow_outside_links, {root})
    scan.files.sort()
    return scan


def _walk(scan: FolderScan, root: Path, directory: Path, parts: tuple[str, ...], follow: bool,
          seen: set[Path]) -> None:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        raise InputError(f"{directory}: cannot list this folder of the corpus ({exc.strerror})") from exc
    for entry in entries:
        rel = (*parts, entry.name)
        shown = _printable("/".join(rel))
        if entry.name.startswith("."):
            scan.hidden.append(shown)
            continue
        path = Path(entry.path)
        real = path.resolve() if entry.is_symlink() else None
        if real is not None:
            if not real.is_relative_to(root):
                if not follow:
                    scan.outside.append(shown)
                    continue
            elif any(part.startswith(".") for part in real.relative_to(root).parts):
                scan.hidden.append(shown)  # a link to a hidden entry is hidden too
                continue
        if entry.is_dir():
            if real is not None and (real.is_relative_to(root) or real in seen):
                continue  # read at its own path (or already walked: a loop of links)
            if real is not None:
                seen.add(real)
            _walk(scan, root, path, rel, follow, seen)
        elif entry.is_file() and Path(entry.name).suffix.lower() in TEXT_SUFFIXES:
            if _UNUSABLE_NAME.search("/".join(rel)):
                scan.bad_names.append(shown)
            else:
                scan.files.append("/".join(rel))


def _printable(rel: str) -> str:
    """A relative path as the user would type it: bytes that are not UTF-8 as ``\\xe9``, controls escaped."""
    raw = os.fsencode(rel).decode("utf-8", "backslashreplace")
    return raw if not _UNUSABLE_NAME.search(raw) else repr(raw)[1:-1]


def folder_source(folder: str | Path, rel: str = "") -> str:
    """What a document of ``folder``'s file ``rel`` records as its source: ``FOLDER/REL`` (``FOLDER`` the
    folder's own name); with no ``rel``, the prefix of every such record."""
    return f"{Path(folder).resolve().name}/{rel}"


def stale_folder_ids(old: Iterable[Document], new: Iterable[Document], folder: str | Path, *,
                     sync: bool, index: str | Path = "the index") -> list[str]:
    """Ids of an index's documents to remove when ``folder`` is added again: the documents of a file that
    still gives documents but no longer this one (a section removed or renamed) and, with ``sync``, the
    documents of the folder's files that give none (deleted, emptied or now skipped). Only documents whose
    source record names this folder are considered; those without one (from a ``.jsonl``/``.json`` file,
    from Python, or written before sources were recorded) are never removed: when ``sync`` meets an
    index (``index``) none of whose documents has one, a warning says so."""
    old, new = list(old), list(new)
    if sync and old and not any(d.source for d in old):
        logger.warning("%s: its documents carry no record of the file they came from (written before sirerag "
                       "recorded it, or not read from a folder): --sync removes none of them; rebuild the index "
                       "from the folder to keep it in step", index)
    prefix, new_ids = folder_source(folder), {d.id for d in new}
    present = {d.source for d in new}
    return [d.id for d in old if d.source.startswith(prefix) and d.id not in new_ids
            and (sync or d.source in present)]
