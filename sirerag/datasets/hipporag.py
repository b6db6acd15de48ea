"""HippoRAG's dataset pairs: ``NAME_corpus.json`` and ``NAME.json`` (both JSON lists).

The corpus file holds ``{title, text}`` passages (an ``idx`` field may be there too);
all of them, de-duplicated, form the corpus. The questions file holds the original
records of the dataset it was cut from, in one of three shapes (as HippoRAG's own
evaluation reads them):

* HotpotQA/2Wiki: ``context`` + ``supporting_facts`` (gold = the supporting titles'
  paragraphs; sentences joined with ``""`` or ``" "``, whichever is in the corpus);
* ``contexts``: ``[{title, text, is_supporting}]``;
* MuSiQue: ``paragraphs``: ``[{title, paragraph_text or text, is_supporting}]``
  (a paragraph without ``is_supporting`` counts as supporting, as in HippoRAG).

Answers are ``answer`` (or ``gold_ans``; a string or a list) plus ``answer_aliases``.
A question whose gold passage is not in the corpus file is dropped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from sirerag.datasets.base import (
    Collector,
    field_of,
    hops_of,
    question_row,
    records,
    sentences_context,
    split_of,
    supporting_titles,
)
from sirerag.core.errors import InputError
from sirerag.core.types import document_id

NAME = "hipporag"
INPUTS = "HippoRAG's NAME_corpus.json and NAME.json"


def convert(inputs: Sequence[Path], *, split: str | None = None) -> Collector:
    corpus_files = [p for p in inputs if p.stem.endswith("_corpus")]
    question_files = [p for p in inputs if not p.stem.endswith("_corpus")]
    if len(corpus_files) != 1 or len(question_files) != 1:
        raise InputError(f"hipporag: expected two files, NAME_corpus.json and NAME.json, got "
                         f"{', '.join(str(p) for p in inputs)}")
    collector = Collector(NAME)
    for where, obj in records(corpus_files[0]):
        text = field_of(where, obj, "text", str)
        collector.corpus_passage(field_of(where, obj, "title", str, optional=True) or "", text)
    path = question_files[0]
    for i, (where, obj) in enumerate(records(path)):
        _add_question(collector, where, obj, i, source=path.name, split=split_of(path, split))
    return collector


def _add_question(collector: Collector, where: str, obj: Any, index: int, *, source: str, split: str) -> None:
    key = "id" if isinstance(obj, dict) and "id" in obj else "_id"
    raw = field_of(where, obj, key, (str, int), optional=True)
    qid = str(raw) if raw is not None else f"{Path(source).stem}-{index}"
    where = f"{where} (id {qid})"
    question = field_of(where, obj, "question", str)
    candidates = _gold_candidates(where, obj)
    if not candidates:
        collector.drop("no supporting paragraph")
        return
    gold = []
    for options in candidates:
        pid = next((p for p in options if p in collector.corpus_ids), None)
        if pid is None:
            collector.drop("gold passage not in the corpus file")
            return
        gold.append(pid)
    extra = {"type": field_of(where, obj, "type", str, optional=True), "hops": hops_of(qid)}
    collector.question(question_row(collector, qid, question, _answers(where, obj), gold, source=source,
                                    split=split, **extra))


def _gold_candidates(where: str, obj: Any) -> list[list[str]]:
    """For each gold paragraph, the ids it may have in the corpus."""
    if isinstance(obj, dict) and "supporting_facts" in obj:
        titles = set(supporting_titles(where, obj))
        return [list(dict.fromkeys(document_id(t, sep.join(s)) for sep in ("", " ")))
                for t, s in sentences_context(where, obj) if t in titles]
    name = "contexts" if isinstance(obj, dict) and "contexts" in obj else "paragraphs"
    out = []
    for i, para in enumerate(field_of(where, obj, name, list)):
        here = f"{where}: {name}[{i}]"
        supporting = field_of(here, para, "is_supporting", bool, optional=name == "paragraphs")
        if supporting is False:
            continue
        text = para.get("text") if isinstance(para, dict) and "text" in para else None
        if text is None:
            text = field_of(here, para, "paragraph_text", str)
        elif not isinstance(text, str):
            field_of(here, para, "text", str)
        out.append([document_id(field_of(here, para, "title", str), text)])
    return out


def _answers(where: str, obj: Any) -> list[str]:
    key = "gold_ans" if "gold_ans" in obj and "answer" not in obj else "answer"
    answer = field_of(where, obj, key, (str, list, int, float))
    out = [str(a) for a in (answer if isinstance(answer, list) else [answer])]
    out += [str(a) for a in field_of(where, obj, "answer_aliases", list, optional=True) or []]
    return list(dict.fromkeys(out))
