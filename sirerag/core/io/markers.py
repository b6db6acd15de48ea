"""How sirerag knows a file it wrote itself again (for the output guard, :mod:`sirerag.core.io.guard`).

Each kind of output carries a marker: an inspect report ``<meta name="generator" content="sirerag ...">``
(or, written before that tag, its ``<title>sirerag index``), an eval result or dry-run plan a
``"generator": "sirerag ..."`` key (or, older, the fields of an eval result), a TREC run the tag
``sirerag-...`` on every line, a plot the PNG text chunk ``Software: sirerag ...``. An empty file holds
nothing and counts as replaceable.
"""
from __future__ import annotations

import json
from pathlib import Path

from sirerag import __version__

#: What sirerag writes into its files so the guard knows them again.
GENERATOR = f"sirerag {__version__}"
_PEEK = 1 << 16


def written_by_sirerag(path: Path) -> bool:
    """Whether the file ``path`` is one sirerag wrote (an HTML report, an eval result or build plan,
    a TREC run, a plot), by the marker each carries; an empty file counts (it holds nothing)."""
    try:
        size = path.stat().st_size
        if size == 0:
            return True
        with open(path, "rb") as fh:
            head = fh.read(_PEEK)
    except OSError:
        return False
    if head.startswith(b"\x89PNG"):
        return b"tEXtSoftware\x00sirerag" in head
    if b'<meta name="generator" content="sirerag' in head or b"<title>sirerag index " in head:
        return True  # an inspect report (the title: one written before the generator tag)
    if head.lstrip().startswith(b"{"):
        return _sirerag_json(path, size)
    return _sirerag_run(head)


def _sirerag_json(path: Path, size: int) -> bool:
    if size > 64 << 20:
        return False
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, OSError, RecursionError):
        return False
    if not isinstance(data, dict):
        return False
    if str(data.get("generator", "")).startswith("sirerag"):
        return True
    # an eval result of an earlier version (before the generator key)
    return "retriever" in data and "n_questions" in data and any("@" in str(k) for k in data)


def _sirerag_run(head: bytes) -> bool:
    lines = head.split(b"\n")
    if len(lines) > 1:
        lines = lines[:-1]  # the last may be cut by the peek
    for line in lines:
        fields = line.split()
        if fields and not (len(fields) == 6 and fields[1] == b"Q0" and fields[5].startswith(b"sirerag")):
            return False
    return any(line.strip() for line in lines)
