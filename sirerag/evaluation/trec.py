"""TREC run and qrels files, as trec_eval, ranx and pyserini read them.

A run line is ``QUERY_ID Q0 DOC_ID RANK SCORE TAG``; a qrels line is
``QUERY_ID 0 DOC_ID RELEVANCE``. Runs hold passages only: a retrieved pool entry's
passages take its rank, the first appearance of a passage wins (as in passage
recall), and the score is ``N - rank + 1`` for a question's ``N`` passages, so the
order survives tools that sort by score (passages of one entry share its score
otherwise).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

from sirerag.core.errors import InputError
from sirerag.core.io import atomic_path

_SPACE = re.compile(r"\s")


def write_run(path: str | Path, rankings: Mapping[str, Sequence[str]], *, tag: str = "sirerag") -> int:
    """Write ``question id -> ranked passage ids`` as a TREC run (atomically); returns the lines written.

    Raises:
        InputError: a question or passage id (or the tag) contains white space, which the format
            cannot hold.
    """
    _check_token("run tag", tag)
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for qid, ranked in rankings.items():
            _check_token("question id", qid)
            for rank, pid in enumerate(ranked, start=1):
                _check_token("passage id", pid)
                fh.write(f"{qid} Q0 {pid} {rank} {len(ranked) - rank + 1} {tag}\n")
                n += 1
    return n


def write_qrels(path: str | Path, gold: Mapping[str, Sequence[str]]) -> int:
    """Write ``question id -> gold passage ids`` as TREC qrels (relevance 1); returns the lines written."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for qid, pids in gold.items():
            _check_token("question id", qid)
            for pid in dict.fromkeys(pids):
                _check_token("passage id", pid)
                fh.write(f"{qid} 0 {pid} 1\n")
                n += 1
    return n


def _check_token(what: str, value: str) -> None:
    if not value or _SPACE.search(value):
        raise InputError(f"{what} {value!r} cannot be written to a TREC file: it is empty or contains white space")
