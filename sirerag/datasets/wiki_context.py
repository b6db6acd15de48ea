"""HotpotQA and 2WikiMultiHopQA release files: one JSON list of question records.

Each record has ``_id``, ``question``, ``answer``, ``type``, ``context`` (a list of
``[title, [sentence, ...]]``: the question's 10 paragraphs) and ``supporting_facts``
(``[[title, sentence index], ...]``). A paragraph's text is its sentences joined:
HotpotQA's sentences keep their leading space and are joined with ``""``;
2Wiki's are stripped and joined with ``" "`` (HippoRAG's convention; white space is
collapsed afterwards either way). Every paragraph joins the corpus; the paragraphs
whose title a supporting fact names are the gold, in context order. A question whose
supporting title is missing from its context is dropped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from sirerag.datasets.base import (
    Collector,
    answers_of,
    field_of,
    question_row,
    records,
    sentences_context,
    split_of,
    supporting_titles,
)


def convert_files(name: str, separator: str, inputs: Sequence[Path], split: str | None) -> Collector:
    collector = Collector(name)
    for path in inputs:
        for where, obj in records(path):
            add_record(collector, where, obj, separator=separator, source=path.name, split=split_of(path, split))
    return collector


def add_record(collector: Collector, where: str, obj: object, *, separator: str, source: str, split: str) -> None:
    """Add one HotpotQA/2Wiki-shaped record (also used for HippoRAG's copies of them)."""
    qid = str(field_of(where, obj, "_id", (str, int)) if isinstance(obj, dict) and "_id" in obj
              else field_of(where, obj, "id", (str, int)))
    where = f"{where} (id {qid})"
    question = field_of(where, obj, "question", str)
    answers = answers_of(where, obj)
    titles = set(supporting_titles(where, obj))
    context, gold, found, empty_gold = [], [], set(), False
    for title, sentences in sentences_context(where, obj):
        pid = collector.passage(title, separator.join(sentences))
        if title in titles:
            found.add(title)
            if pid is None:
                empty_gold = True
        if pid is None:
            continue
        context.append(pid)
        if title in titles:
            gold.append(pid)
    if titles - found:
        collector.drop("supporting title not in the context")
    elif empty_gold:
        collector.drop("a supporting paragraph has empty text")
    elif not gold:
        collector.drop("no supporting paragraph")
    else:
        kind = field_of(where, obj, "type", str, optional=True)
        collector.question(question_row(collector, qid, question, answers, gold, source=source, split=split,
                                        type=kind), context)
