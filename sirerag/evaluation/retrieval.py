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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sirerag.errors import InputError
from sirerag.evaluation.text import contains_answer, is_yes_no
from sirerag.io import read_jsonl
from sirerag.retrievers.base import Hit, Retriever
from sirerag.tokens import get_encoding
from sirerag.types import Pool

logger = logging.getLogger(__name__)

PASSAGE_KS = (2, 5, 10, 20)
TOKEN_BUDGETS = (256, 512, 1024, 2048)


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
    out: list[Question] = []
    for lineno, row in enumerate(read_jsonl(path), start=1):
        for name, kind in (("question", str), ("answers", list), ("gold_passage_ids", list)):
            if not isinstance(row.get(name), kind):
                raise InputError(f"{path}: question row {lineno}: field '{name}' must be a {kind.__name__}")
        if not row["question"].strip():
            raise InputError(f"{path}: question row {lineno}: 'question' is empty")
        if split is not None and row.get("split") != split:
            continue
        out.append(Question(id=str(row.get("id", lineno)), question=row["question"],
                            answers=tuple(str(a) for a in row["answers"]),
                            gold_passage_ids=tuple(row["gold_passage_ids"]), split=str(row.get("split", ""))))
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


def passage_recall(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    gold_set = set(gold)
    return len(gold_set.intersection(ranked[:k])) / len(gold_set) if gold_set else 0.0


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
        return "\n\n".join(parts)


def evaluate_retrieval(
    pool: Pool,
    retriever: Retriever,
    questions: Sequence[Question],
    *,
    ks: Sequence[int] = PASSAGE_KS,
    budgets: Sequence[int] = TOKEN_BUDGETS,
    depth: int = 200,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Passage recall@k and answer recall@T of ``retriever`` over ``pool``.

    Args:
        depth: pool entries retrieved per question (enough to fill the largest budget).

    Returns:
        ``{"retriever", "n_questions", "passage_recall@k"..., "answer_recall@T"...,
        "answer_recall_questions", "yes_no_excluded", "latency_ms_p50", "latency_ms_p95"}``.
    """
    from tqdm.auto import tqdm

    contexts = ContextBuilder(pool)
    recalls = {k: [] for k in ks}
    answer_hits = {t: [] for t in budgets}
    latencies: list[float] = []
    excluded = 0
    for q in tqdm(questions, desc=f"eval {retriever.name}", unit="q", disable=not show_progress):
        start = time.perf_counter()
        hits = retriever.search(q.question, k=depth)
        latencies.append((time.perf_counter() - start) * 1000.0)
        ranked = passage_ranking(hits, pool)
        for k in ks:
            recalls[k].append(passage_recall(ranked, q.gold_passage_ids, k))
        if is_yes_no(q.answers):
            excluded += 1
            continue
        for t in budgets:
            answer_hits[t].append(contains_answer(contexts.context(hits, t), q.answers))
    result: dict[str, Any] = {"retriever": retriever.name, "n_questions": len(questions)}
    for k in ks:
        result[f"passage_recall@{k}"] = round(float(np.mean(recalls[k])), 4)
    for t in budgets:
        result[f"answer_recall@{t}"] = round(float(np.mean(answer_hits[t])), 4) if answer_hits[t] else None
    result["answer_recall_questions"] = len(questions) - excluded
    result["yes_no_excluded"] = excluded
    result["latency_ms_p50"] = round(float(np.percentile(latencies, 50)), 2)
    result["latency_ms_p95"] = round(float(np.percentile(latencies, 95)), 2)
    return result
