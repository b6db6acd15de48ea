"""BEIR dataset folders: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/SPLIT.tsv``.

``corpus.jsonl`` rows are ``{_id, title, text, metadata?}``, ``queries.jsonl`` rows
``{_id, text, metadata?}``, and ``qrels/SPLIT.tsv`` has a ``query-id corpus-id score``
header and one tab-separated judgement per line. Judgements with score > 0 are the
gold passages. :func:`read_beir` reads a folder as it is (BEIR's own ids);
:func:`convert` rewrites it with bench ids (documents with the same title and text
become one passage). BEIR has no answers: converted questions have ``answers: []``
(unless a query's ``metadata`` carries ``answers``, as in folders sirerag writes).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sirerag.datasets.base import Collector, Conversion, field_of, question_row, records
from sirerag.core.errors import InputError
from sirerag.core.io.atomic import atomic_path
from sirerag.core.io.files import write_jsonl

NAME = "beir"
INPUTS = "a BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)"
NO_ANSWERS = "BEIR has no answers: answers are empty, so answer recall is skipped when evaluating"


@dataclass(frozen=True)
class BeirFolder:
    """A BEIR folder as read: documents ``(_id, title, text)``, queries ``_id -> text`` and
    ``qrels[query id][doc id] = score`` (every score, including 0), in file order."""

    path: Path
    split: str
    documents: tuple[tuple[str, str, str], ...]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    metadata: dict[str, dict]


def read_beir(folder: str | Path, split: str = "test", *, corpus: bool = True) -> BeirFolder:
    """Read a BEIR folder (without ``corpus=True``, only its queries and qrels).

    Raises:
        InputError: a missing file, a malformed row or judgement (names file and line).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"BEIR folder not found: {folder}")
    documents = []
    for where, obj in records(folder / "corpus.jsonl") if corpus else ():
        doc_id = str(field_of(where, obj, "_id", (str, int)))
        title = field_of(where, obj, "title", str, optional=True) or ""
        documents.append((doc_id, title, field_of(where, obj, "text", str)))
    queries: dict[str, str] = {}
    metadata: dict[str, dict] = {}
    for where, obj in records(folder / "queries.jsonl"):
        qid = str(field_of(where, obj, "_id", (str, int)))
        if qid in queries:
            raise InputError(f"{where}: query id {qid!r} is used twice; ids must be unique")
        queries[qid] = field_of(where, obj, "text", str)
        metadata[qid] = field_of(where, obj, "metadata", dict, optional=True) or {}
    return BeirFolder(folder, split, tuple(documents), queries, read_qrels(folder / "qrels" / f"{split}.tsv"),
                      metadata)


def query_answers(metadata: dict) -> list[str]:
    """Answers a query's ``metadata`` carries (folders written by sirerag keep them there), else none."""
    answers = metadata.get("answers")
    return [str(a) for a in answers] if isinstance(answers, list) else []


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``query-id<TAB>corpus-id<TAB>score`` lines (a header line is skipped)."""
    if not path.is_file():
        raise InputError(f"qrels file not found: {path} (choose the split with --split)")
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            parts = line.rstrip("\r\n").split("\t")
            if not line.strip() or (lineno == 1 and parts[0] == "query-id"):
                continue
            if len(parts) != 3:
                raise InputError(f"{path}:{lineno}: expected 3 tab-separated fields "
                                 f"(query-id, corpus-id, score), got {len(parts)}")
            try:
                score = int(parts[2])
            except ValueError:
                raise InputError(f"{path}:{lineno}: score must be an integer, got {parts[2]!r}") from None
            qrels.setdefault(parts[0], {})[parts[1]] = score
    return qrels


def convert(inputs: Sequence[Path], *, split: str | None = None) -> Collector:
    if len(inputs) != 1:
        raise InputError(f"beir: expected one BEIR folder, got {len(inputs)} inputs")
    beir = read_beir(inputs[0], split or "test")
    collector = Collector(NAME)
    to_pid: dict[str, str] = {}
    for doc_id, title, text in beir.documents:
        pid = collector.corpus_passage(title, text)
        if pid is not None:
            to_pid[doc_id] = pid
    collector.drop("judgement for a query not in queries.jsonl", sum(
        len(docs) for qid, docs in beir.qrels.items() if qid not in beir.queries))
    for qid, text in beir.queries.items():
        judged = beir.qrels.get(qid, {})
        relevant = [d for d, score in judged.items() if score > 0]
        missing = [d for d in relevant if d not in to_pid]
        collector.drop("relevant document not in the corpus (or empty)", len(missing))
        gold = [to_pid[d] for d in relevant if d in to_pid]
        if not gold:
            collector.drop(f"query without a relevant document in qrels/{beir.split}.tsv")
            continue
        meta = beir.metadata[qid]
        extra = {k: v for k, v in meta.items() if k not in _ROW_FIELDS}
        collector.question(question_row(collector, qid, text, query_answers(meta), gold,
                                        source=str(meta.get("source", f"beir:{beir.path.name}")),
                                        split=beir.split, **extra))
    if not any(q["answers"] for q in collector.questions):
        collector.notes.append(NO_ANSWERS)
    return collector


_ROW_FIELDS = ("id", "question", "answers", "gold_titles", "gold_passage_ids", "source", "split")


def write_beir(conversion: Conversion, out: str | Path) -> list[Path]:
    """Write a conversion as a BEIR folder: ``corpus.jsonl``, ``queries.jsonl`` (the question
    row's other fields, answers included, go into ``metadata``) and one ``qrels/SPLIT.tsv``
    per split (``test`` for questions without one), every gold passage with score 1."""
    out = Path(out)
    write_jsonl(out / "corpus.jsonl", ({"_id": r["id"], "title": r["title"], "text": r["text"]}
                                       for r in conversion.corpus))
    write_jsonl(out / "queries.jsonl", ({"_id": q["id"], "text": q["question"],
                                         "metadata": {k: v for k, v in q.items()
                                                      if k not in ("id", "question", "gold_passage_ids")}}
                                        for q in conversion.questions))
    by_split: dict[str, list[str]] = {}
    for q in conversion.questions:
        by_split.setdefault(q.get("split") or "test", []).extend(
            f"{q['id']}\t{pid}\t1" for pid in q["gold_passage_ids"])
    paths = [out / "corpus.jsonl", out / "queries.jsonl"]
    for split, lines in by_split.items():
        path = out / "qrels" / f"{split}.tsv"
        with atomic_path(path) as tmp:
            tmp.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{line}\n" for line in lines),
                           encoding="utf-8")
        paths.append(path)
    return paths
