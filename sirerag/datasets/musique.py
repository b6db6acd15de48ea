"""MuSiQue release files (``musique_ans_v1.0_dev.jsonl``, ``musique_full_v1.0_*.jsonl``).

One JSON object per line: ``id``, ``question``, ``answer``, ``answer_aliases``,
``answerable``, ``question_decomposition`` and ``paragraphs`` (20 per question:
``{idx, title, paragraph_text, is_supporting}``). Every paragraph joins the corpus;
the ``is_supporting`` ones are the gold passages, in paragraph order. Answers are
the answer followed by its aliases. Unanswerable questions (``answerable: false``,
only in the ``full`` files) are dropped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from sirerag.datasets.base import Collector, answers_of, field_of, hops_of, question_row, records, split_of

NAME = "musique"
INPUTS = "one or more MuSiQue .jsonl files (e.g. musique_ans_v1.0_dev.jsonl)"


def convert(inputs: Sequence[Path], *, split: str | None = None) -> Collector:
    collector = Collector(NAME)
    for path in inputs:
        for where, obj in records(path):
            add_record(collector, where, obj, source=path.name, split=split_of(path, split))
    return collector


def add_record(collector: Collector, where: str, obj: object, *, source: str, split: str) -> None:
    """Add one MuSiQue record (also used for HippoRAG's MuSiQue-shaped questions)."""
    qid = str(field_of(where, obj, "id", (str, int)))
    where = f"{where} (id {qid})"
    question = field_of(where, obj, "question", str)
    answers = answers_of(where, obj, "answer_aliases")
    context, gold, empty_gold = [], [], False
    for i, para in enumerate(field_of(where, obj, "paragraphs", list)):
        here = f"{where}: paragraphs[{i}]"
        title = field_of(here, para, "title", str)
        text = field_of(here, para, "paragraph_text", str)
        supporting = field_of(here, para, "is_supporting", bool, optional=True)
        pid = collector.passage(title, text)
        if pid is None:
            empty_gold |= bool(supporting)
            continue
        context.append(pid)
        if supporting:
            gold.append(pid)
    if field_of(where, obj, "answerable", bool, optional=True) is False:
        collector.drop("unanswerable (answerable: false)")
    elif empty_gold:
        collector.drop("a supporting paragraph has empty text")
    elif not gold:
        collector.drop("no supporting paragraph")
    else:
        decomposition = field_of(where, obj, "question_decomposition", list, optional=True)
        hops = hops_of(qid) or (len(decomposition) if decomposition else None)
        collector.question(question_row(collector, qid, question, answers, gold, source=source, split=split,
                                        hops=hops), context)

