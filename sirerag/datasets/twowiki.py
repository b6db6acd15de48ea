"""2WikiMultiHopQA release files (``dev.json``, ``train.json``); the record shape is
described in :mod:`sirerag.datasets.wiki_context`."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from sirerag.datasets.base import Collector
from sirerag.datasets.wiki_context import convert_files

NAME = "2wiki"
INPUTS = "one or more 2WikiMultiHopQA .json files (e.g. dev.json)"
SEPARATOR = " "  # 2Wiki sentences are stripped


def convert(inputs: Sequence[Path], *, split: str | None = None) -> Collector:
    return convert_files(NAME, SEPARATOR, inputs, split)
