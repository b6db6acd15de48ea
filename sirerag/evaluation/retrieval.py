"""Retrieval metrics on benchmark questions.

Two views, because a SiReRAG pool holds more than passages:

* ``passage_recall@k``: ranked pool entries are mapped to the passages they came
  from (first appearance wins) and ``|top-k ∩ gold| / |gold|`` is averaged. It
  compares retrievers over the same pool of passages (``--trees none``).
* ``answer_recall@T``: pool entries are taken in rank order until ``T`` tokens
  (the last one cut at the budget) and a question counts as a hit when a gold
  answer (SQuAD-normalised) occurs in that text. This compares pools with
  different kinds of entries fairly, since each gets the same reading budget.
  Yes/no questions are left out of it (their answers occur anywhere by chance).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from sirerag.core.config import QueryConfig
from sirerag.core.errors import InputError
from sirerag.evaluation.metrics import ndcg, passage_recall, reciprocal_rank
from sirerag.evaluation.text import contains_answer, is_yes_no
from sirerag.core.io.files import json_type, read_jsonl_numbered
from sirerag.retrievers.base import Hit, Retriever, check_query
from sirerag.text.tokens import get_encoding
from sirerag.core.types import Pool

logger = logging.getLogger(__name__)

PASSAGE_KS = (2, 5, 10, 20)
TOKEN_BUDGETS = (256, 512, 1024, 2048)
#: cut-off of nDCG and MRR (BEIR's headline figures are nDCG@10 and MRR@10)
RANK_K = 10
#: ``passage_recall_curve[i]`` of the results is passage recall at k = i + 1
CURVE_MAX_K = 20
NO_ANSWERS = "answer recall skipped: no question has gold answers (BEIR qrels carry none)"


@dataclass(frozen=True)
class Question:
    """A benchmark question with gold answers and gold passage ids."""

    id: str
    question: str
    answers: tuple[str, ...]
    gold_passage_ids: tuple[str, ...]
    split: str = ""


def load_questions(path: str | Path, *, split: str | None = None, limit: int | None = None) -> list[Question]:
    """Read ``questions.jsonl`` (``{id, question, answers, gold_passage_ids, split?}``).

    Raises:
        InputError: a row misses a field or has the wrong type (names file and line).
    """
    from sirerag.datasets.base import answer_strings

    out: list[Question] = []
    first_line: dict[str, int] = {}
    for lineno, row in read_jsonl_numbered(path):
        where = f"{path}: question row {lineno}"
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected a JSON object, got a JSON {json_type(row)}")
        for name, kind in (("question", str), ("answers", list), ("gold_passage_ids", list)):
            if not isinstance(row.get(name), kind):
                raise InputError(f"{where}: field '{name}' must be a {kind.__name__}, got a JSON "
                                 f"{json_type(row.get(name))}")
        if not row["question"].strip():
            raise InputError(f"{where}: 'question' is empty")
        check_query(row["question"], max_chars=QueryConfig().max_chars, name=f"{where}: 'question'")
        raw_id = row.get("id", lineno)
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or not str(raw_id).strip():
            raise InputError(f"{where}: 'id' must be a non-empty string or an integer, got {raw_id!r}")
        if str(raw_id) in first_line:
            raise InputError(f"{where}: question id {str(raw_id)!r} is already used at question row "
                             f"{first_line[str(raw_id)]}; ids must be unique")
        first_line[str(raw_id)] = lineno
        gold = row["gold_passage_ids"]
        bad = next((g for g in gold if not isinstance(g, str)), None) if gold else None
        if bad is not None:
            raise InputError(f"{where}: field 'gold_passage_ids' must hold strings, got a JSON {json_type(bad)}")
        if split is not None and row.get("split") != split:
            continue
        out.append(Question(id=str(raw_id), question=row["question"],
                            answers=tuple(answer_strings(where, "answers", row["answers"])),
                            gold_passage_ids=tuple(gold), split=str(row.get("split", ""))))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise InputError(f"{path}: no questions" + (f" with split={split!r}" if split else ""))
    return out


def passage_ranking(hits: Sequence[Hit], pool: Pool) -> list[str]:
    """Source passages of ranked entries, in order of first appearance."""
    seen: dict[str, None] = {}
    for hit in hits:
        for pid in pool.get(hit.entry_id).passages:
            seen.setdefault(pid, None)
    return list(seen)


class ContextBuilder:
    """Concatenates ranked entries up to a token budget (cl100k tokens)."""

    def __init__(self, pool: Pool, encoding: str = "cl100k_base") -> None:
        self.pool = pool
        self.enc = get_encoding(encoding)
        self._tokens: dict[str, list[int]] = {}

    def tokens(self, entry_id: str) -> list[int]:
        if entry_id not in self._tokens:
            self._tokens[entry_id] = self.enc.encode(self.pool.get(entry_id).text, disallowed_special=())
        return self._tokens[entry_id]

    def context(self, hits: Sequence[Hit], budget: int) -> str:
        return "\n\n".join(self.parts(hits, budget))

    def parts(self, hits: Sequence[Hit], budget: int) -> list[str]:
        """The text of each entry read, in order, up to ``budget`` tokens (the last one cut at it)."""
        parts: list[str] = []
        used = 0
        for hit in hits:
            toks = self.tokens(hit.entry_id)
            room = budget - used
            if room <= 0:
                break
            if len(toks) <= room:
                parts.append(self.pool.get(hit.entry_id).text)
                used += len(toks)
            else:
                parts.append(self.enc.decode(toks[:room]))
                used = budget
        return parts


@dataclass(frozen=True)
class RetrievalResult:
    """Retrieval metrics of one retriever on a set of questions (means over questions, 0..1).

    ``to_dict()`` gives the JSON of ``sirerag eval --json``; ``rankings`` (question id ->
    ranked passage ids, for ``--run``) is not part of it.
    """

    retriever: str
    n_questions: int
    passage_recall: Mapping[int, float]
    answer_recall: Mapping[int, float | None]
    passage_recall_curve: tuple[float, ...]
    ndcg: Mapping[int, float]
    mrr: Mapping[int, float]
    answer_recall_questions: int
    yes_no_excluded: int
    no_answer_excluded: int
    latency_ms_p50: float
    latency_ms_p95: float
    kind_share: Mapping[int, Mapping[str, float]] = field(default_factory=dict)
    rankings: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready results; the keys are those ``sirerag eval --json`` has always written, then
        ``ndcg@10``, ``mrr@10``, ``passage_recall_curve`` (k = 1..20) and ``no_answer_excluded``."""
        out: dict[str, Any] = {"retriever": self.retriever, "n_questions": self.n_questions}
        out.update({f"passage_recall@{k}": v for k, v in self.passage_recall.items()})
        out.update({f"answer_recall@{t}": v for t, v in self.answer_recall.items()})
        out.update({f"ndcg@{k}": v for k, v in self.ndcg.items()})
        out.update({f"mrr@{k}": v for k, v in self.mrr.items()})
        out["passage_recall_curve"] = list(self.passage_recall_curve)
        out.update(answer_recall_questions=self.answer_recall_questions, yes_no_excluded=self.yes_no_excluded,
                   no_answer_excluded=self.no_answer_excluded)
        out.update({f"kind_share@{k}": dict(v) for k, v in self.kind_share.items()})
        out.update(latency_ms_p50=self.latency_ms_p50,
                   latency_ms_p95=self.latency_ms_p95)
        return out


def evaluate_retrieval(
    pool: Pool,
    retriever: Retriever,
    questions: Sequence[Question],
    *,
    ks: Sequence[int] = PASSAGE_KS,
    budgets: Sequence[int] = TOKEN_BUDGETS,
    depth: int = 200,
    share_k: int = 5,
    show_progress: bool = True,
) -> RetrievalResult:
    """Passage recall@k, nDCG@10, MRR@10 and answer recall@T of ``retriever`` over ``pool``.

    Passage metrics use the ranking of source passages (first appearance wins). Answer
    recall leaves out yes/no questions and questions without answers; when no question
    has answers (BEIR) it is ``None`` and the skip is logged.

    Args:
        depth: pool entries retrieved per question (enough to fill the largest budget).
        share_k: the top slots counted in ``kind_share@k`` (the share of those slots held by each
            kind of entry, ``tree/kind`` such as ``relatedness/aggregate``, over all questions).
    """
    from tqdm.auto import tqdm

    contexts = ContextBuilder(pool)
    per_question: dict[str, list[float]] = {}
    answer_hits: dict[int, list[bool]] = {t: [] for t in budgets}
    rankings: dict[str, tuple[str, ...]] = {}
    latencies: list[float] = []
    yes_no = no_answer = 0
    curve_ks = range(1, CURVE_MAX_K + 1)
    kinds: dict[str, int] = {}
    for q in tqdm(questions, desc=f"eval {retriever.name}", unit="q", disable=not show_progress):
        start = time.perf_counter()
        hits = retriever.search(q.question, k=depth)
        latencies.append((time.perf_counter() - start) * 1000.0)
        ranked = passage_ranking(hits, pool)
        rankings[q.id] = tuple(ranked)
        for hit in hits[:share_k]:
            entry = pool.get(hit.entry_id)
            kind = "leaf" if entry.kind == "leaf" else f"{entry.tree}/{entry.kind}"
            kinds[kind] = kinds.get(kind, 0) + 1
        gold = q.gold_passage_ids
        values = {**{f"r{k}": passage_recall(ranked, gold, k) for k in ks},
                  **{f"c{k}": passage_recall(ranked, gold, k) for k in curve_ks},
                  "ndcg": ndcg(ranked, gold, RANK_K), "mrr": reciprocal_rank(ranked, gold, RANK_K)}
        for key, value in values.items():
            per_question.setdefault(key, []).append(value)
        if not q.answers:
            no_answer += 1
        elif is_yes_no(q.answers):
            yes_no += 1
        else:
            for t in budgets:
                answer_hits[t].append(contains_answer(contexts.context(hits, t), q.answers))
    if questions and no_answer == len(questions):
        logger.info(NO_ANSWERS)

    def mean(key: str) -> float:
        return float(np.mean(per_question[key])) if per_question else 0.0

    return RetrievalResult(
        retriever=retriever.name,
        n_questions=len(questions),
        passage_recall={k: mean(f"r{k}") for k in ks},
        answer_recall={t: float(np.mean(answer_hits[t])) if answer_hits[t] else None for t in budgets},
        passage_recall_curve=tuple(mean(f"c{k}") for k in curve_ks),
        ndcg={RANK_K: mean("ndcg")},
        mrr={RANK_K: mean("mrr")},
        answer_recall_questions=len(questions) - yes_no - no_answer,
        yes_no_excluded=yes_no,
        no_answer_excluded=no_answer,
        latency_ms_p50=round(float(np.percentile(latencies, 50)), 2) if latencies else 0.0,
        latency_ms_p95=round(float(np.percentile(latencies, 95)), 2) if latencies else 0.0,
        kind_share={share_k: {kind: n / (sum(kinds.values()) or 1) for kind, n in sorted(kinds.items())}},
        rankings=rankings,
    )


def load_beir_questions(folder: str | Path, *, split: str = "test", limit: int | None = None) -> list[Question]:
    """Questions of a BEIR folder with BEIR's own ids (an index built from its ``corpus.jsonl``
    keeps them): queries with at least one judgement of score > 0, those being the gold.
    Answers come from a query's ``metadata.answers`` when present (folders sirerag writes),
    else there are none and answer recall is skipped.

    Raises:
        InputError: a missing file, a malformed row or judgement, or no judged query.
    """
    from sirerag.datasets.beir import query_answers, read_beir

    beir = read_beir(folder, split, corpus=False)
    out: list[Question] = []
    for qid, text in beir.queries.items():
        gold = tuple(d for d, score in beir.qrels.get(qid, {}).items() if score > 0)
        if gold:
            check_query(text, max_chars=QueryConfig().max_chars, name=f"{beir.path}: query {qid!r}")
            out.append(Question(id=qid, question=text, answers=tuple(query_answers(beir.metadata[qid])),
                                gold_passage_ids=gold, split=split))
        if limit is not None and len(out) >= limit:
            break
    skipped = len(beir.queries) - len(out)
    if not out:
        raise InputError(f"{beir.path}: no query has a judgement with score > 0 in qrels/{split}.tsv")
    if skipped and limit is None:
        logger.info("%s: %d quer(ies) without a relevant document in qrels/%s.tsv left out", beir.path, skipped,
                    split)
    return out
