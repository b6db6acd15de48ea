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
from sirerag.errors import ConfigError

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


def write(conversion: Conversion, out: str | Path, *, to: str = "sirerag") -> list[Path]:
    """Write ``conversion`` into the folder ``out``: ``corpus.jsonl`` + ``questions.jsonl``
    (``to="sirerag"``) or a BEIR folder (``to="beir"``). Returns the files written."""
    if to not in TARGETS:
        raise ConfigError(f"to must be one of {list(TARGETS)}, got {to!r}")
    if to == "beir":
        return beir.write_beir(conversion, out)
    return list(write_conversion(conversion, out))


__all__ = ["FORMATS", "TARGETS", "Conversion", "convert", "write", "write_conversion"]
