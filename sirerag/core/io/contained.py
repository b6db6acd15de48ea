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


def leaves(folder: str | Path, rel: str) -> bool:
    """Whether ``rel`` (a path read from a file in ``folder``) leads out of ``folder``: absolute, with a ``..``
    part, or through a symlink whose target lies outside (symlinks are resolved; a missing file is judged by
    where it would be)."""
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts or "\x00" in rel:
        return True
    root = os.path.realpath(folder)
    real = os.path.realpath(os.path.join(root, rel))
    return real != root and not real.startswith(root.rstrip(os.sep) + os.sep)


def field_name(key: str, rel: str) -> str:
    """``key["rel"]``: how a message names the entry ``rel`` of the mapping or list ``key``."""
    return f"{key}[{json.dumps(rel, ensure_ascii=False)}]"


def check_inside(folder: str | Path, rel: object, where: str, *, what: str = "the index folder",
                 error: Callable[[str], SireragError] = IndexFormatError) -> str:
    """``rel`` when it is a relative path inside ``folder``; else ``error`` with the one line
    ``"<where>: path leaves <what>"`` (``where`` names the file and the field). Returns ``rel``."""
    if not isinstance(rel, str) or leaves(folder, rel):
        raise error(f"{where}: path leaves {what}")
    return rel
