"""ColBERT-style collections: ``pid<TAB>text`` lines, one text per line (``collection.tsv``).

Written by the ColBERT index build (:mod:`sirerag.retrievers.colbert`) and by
``sirerag export --format colbert``, so both write the same file.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from sirerag.core.io.atomic import atomic_path

_TSV_BREAKS = re.compile(r"[\t\r\n]+")


def collection_text(text: str) -> str:
    """``text`` for one line of a ``pid<TAB>text`` file: tabs and line breaks become spaces."""
    return _TSV_BREAKS.sub(" ", text).strip()


def write_collection(path: str | Path, texts: Sequence[str]) -> None:
    """Write ``pid<TAB>text`` lines (pid = 0, 1, ...) atomically, UTF-8."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for pid, text in enumerate(texts):
            fh.write(f"{pid}\t{collection_text(text)}\n")

