"""Paths read from a file sirerag wrote (``manifest.json``, ``graph/graph.json``, an export's ``export.json``, a
converted dataset's ``.sirerag-dataset.json``) stay inside the folder that file describes.

Such a path is relative to its folder. One that is absolute, climbs out with ``..`` or reaches a symlink
pointing out of the folder is refused before anything is opened: a manifest saying ``"/etc/hostname"`` or
``"../victim.txt"`` would otherwise have sirerag stat, hash or read a file outside the index.
"""
from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Callable

from sirerag.core.errors import IndexFormatError, SireragError


class Folder:
    """A folder whose paths are checked: its real path, resolved once, and which of its entries are symlinks
    (each looked at once, with ``lstat``; only a path through a symlink is resolved)."""

    def __init__(self, folder: str | Path) -> None:
        self.root = os.path.realpath(folder)
        self._links: dict[str, bool] = {}

    def leaves(self, rel: str) -> bool:
        """Whether ``rel`` (a path read from a file in the folder) leads out of it: absolute, with a ``..`` part,
        or through a symlink whose target lies outside (a missing file is judged by where it would be)."""
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts or "\x00" in rel:
            return True
        path = self.root
        for part in pure.parts:
            path = os.path.join(path, part)
            if path not in self._links:
                self._links[path] = os.path.islink(path)
            if self._links[path]:
                real = os.path.realpath(os.path.join(self.root, rel))
                return real != self.root and not real.startswith(self.root.rstrip(os.sep) + os.sep)
        return False


def leaves(folder: str | Path, rel: str) -> bool:
    """:meth:`Folder.leaves` for one path."""
    return Folder(folder).leaves(rel)


def field_name(key: str, rel: str) -> str:
    """``key["rel"]``: how a message names the entry ``rel`` of the mapping or list ``key``."""
    return f"{key}[{json.dumps(rel, ensure_ascii=False)}]"


def check_inside(folder: str | Path | Folder, rel: object, where: str, *, what: str = "the index folder",
                 error: Callable[[str], SireragError] = IndexFormatError) -> str:
    """``rel`` when it is a relative path inside ``folder`` (a :class:`Folder` when many paths of one folder are
    checked); else ``error`` with the one line ``"<where>: path leaves <what>"`` (``where`` names the file and
    the field). Returns ``rel``."""
    if not isinstance(folder, Folder):
        folder = Folder(folder)
    if not isinstance(rel, str) or folder.leaves(rel):
        raise error(f"{where}: path leaves {what}")
    return rel
