"""sirerag's own benchmark format (``shared/bench``): ``corpus.jsonl`` + ``questions.jsonl``.

Reading it through the converter checks a pair of files: passages get their bench id
from title and text (rows whose ``id`` differs are re-keyed, and gold ids follow),
duplicates are kept once, and questions whose gold passage is missing are dropped.
Question rows are otherwise kept as they are (every field, in order). Used to turn
such a pair into a BEIR folder (``--to beir``) and to check that the writer
reproduces ``shared/bench`` byte for byte.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from sirerag.datasets.base import Collector, field_of, records
from sirerag.core.errors import InputError

NAME = "sirerag"
INPUTS = "CORPUS.jsonl QUESTIONS.jsonl in sirerag's format (as in shared/bench)"


def convert(inputs: Sequence[Path], *, split: str | None = None) -> Collector:
    if len(inputs) != 2:
        raise InputError(f"sirerag: expected two files, CORPUS.jsonl and QUESTIONS.jsonl, got {len(inputs)}")
    corpus_path, questions_path = inputs
    collector = Collector(NAME)
    to_pid: dict[str, str] = {}
    for where, obj in records(corpus_path):
        pid = collector.corpus_passage(field_of(where, obj, "title", str, optional=True) or "",
                                       field_of(where, obj, "text", str))
        raw = field_of(where, obj, "id", (str, int), optional=True)
        if pid is not None:
            to_pid[str(raw) if raw is not None else pid] = pid
    for where, obj in records(questions_path):
        field_of(where, obj, "id", (str, int))
        field_of(where, obj, "question", str)
        field_of(where, obj, "answers", list)
        gold = [str(g) for g in field_of(where, obj, "gold_passage_ids", list)]
        if split is not None and obj.get("split") != split:
            collector.drop(f"question not of split {split!r}")
            continue
        if not gold or any(g not in to_pid for g in gold):
            collector.drop("no gold passage" if not gold else "gold passage not in the corpus file")
            continue
        row = dict(obj, id=str(obj["id"]), gold_passage_ids=[to_pid[g] for g in gold])
        collector.question(row)
    return collector
