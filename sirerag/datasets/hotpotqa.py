"""HotpotQA release files (``hotpot_dev_distractor_v1.json``, ``hotpot_train_v1.1.json``);
the record shape is described in :mod:`sirerag.datasets.wiki_context`."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from sirerag.datasets.base import Collector
from sirerag.datasets.wiki_context import convert_files

NAME = "hotpotqa"
INPUTS = "one or more HotpotQA .json files (e.g. hotpot_dev_distractor_v1.json)"
SEPARATOR = ""  # HotpotQA sentences keep their leading white space


def convert(inputs: Sequence[Path], *, split: str | None = None) -> Collector:
    return convert_files(NAME, SEPARATOR, inputs, split)
