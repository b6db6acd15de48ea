"""Converters from public dataset files to sirerag's benchmark format.

``convert(FORMAT, inputs)`` reads a dataset's original files and returns a
:class:`~sirerag.datasets.base.Conversion`: ``corpus.jsonl`` rows ``{id, title, text}``
and ``questions.jsonl`` rows ``{id, question, answers, gold_titles, gold_passage_ids,
source, split, ...}`` with the ``shared/bench`` id scheme, plus the counts of what was
dropped and why. One small module per format; :data:`FORMATS` is the registry.
"""
from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Sequence

from sirerag.datasets import beir, bench, hipporag, hotpotqa, musique, twowiki
from sirerag.datasets.base import Conversion, write_conversion
from sirerag.core.errors import ConfigError
from sirerag.core.io import atomic_dir, index_lock, write_json
from sirerag.core.io.guard import DATASET_MARKER, check_dataset_out, dataset_marker

#: format name -> module with ``convert(inputs, *, split)``, ``NAME`` and ``INPUTS``.
FORMATS: dict[str, ModuleType] = {m.NAME: m for m in (beir, musique, twowiki, hotpotqa, hipporag, bench)}


def convert(fmt: str, inputs: Sequence[str | Path], *, split: str | None = None,
            ids: Sequence[str] | None = None) -> Conversion:
    """Convert ``inputs`` of format ``fmt``.

    Args:
        fmt: one of :data:`FORMATS`.
        inputs: the dataset's files (or a BEIR folder).
        split: the split written into each question (default: from the file name) and,
            for BEIR, the qrels file read (default ``test``).
        ids: keep only these questions, in this order, and only their paragraphs.

    Raises:
        ConfigError: an unknown format.
        InputError: a missing or malformed input (names file and line or record).
    """
    if fmt not in FORMATS:
        raise ConfigError(f"format must be one of {sorted(FORMATS)}, got {fmt!r}")
    collector = FORMATS[fmt].convert([Path(p) for p in inputs], split=split)
    return collector.result(ids)


#: output layouts of :func:`write`.
TARGETS = ("sirerag", "beir")


def write(conversion: Conversion, out: str | Path, *, to: str = "sirerag", inputs: Sequence[str | Path] = ()
          ) -> list[Path]:
    """Write ``conversion`` into the folder ``out``: ``corpus.jsonl`` + ``questions.jsonl``
    (``to="sirerag"``) or a BEIR folder (``to="beir"``), plus the marker
    :data:`~sirerag.core.io.guard.DATASET_MARKER` listing them. The folder is written beside ``out``
    and swapped in whole. Returns the files written.

    Raises:
        ConfigError: ``out`` may not be replaced (:func:`sirerag.core.io.guard.check_dataset_out`: a folder
            holding files sirerag did not write, an input or a folder around one, inside an index).
    """
    if to not in TARGETS:
        raise ConfigError(f"to must be one of {list(TARGETS)}, got {to!r}")
    shown = Path(out).expanduser()
    out = check_dataset_out(out, inputs=inputs)
    with index_lock(out, "data convert"), atomic_dir(out) as tmp:
        check_dataset_out(out, inputs=inputs)  # again, under the lock
        files = beir.write_beir(conversion, tmp) if to == "beir" else list(write_conversion(conversion, tmp))
        rel = [p.relative_to(tmp).as_posix() for p in files]
        write_json(tmp / DATASET_MARKER, dataset_marker(rel, format=conversion.format, to=to))
    return [shown / r for r in rel]


__all__ = ["FORMATS", "TARGETS", "Conversion", "convert", "write", "write_conversion"]
