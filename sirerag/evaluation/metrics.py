"""Ranking metrics over a passage ranking and a set of gold passages (binary relevance).

Each takes the ranked passage ids (first appearance, as :func:`passage_ranking`
gives them) and the gold ids, and returns a value in 0..1 for one question; the
evaluation averages them. They follow the trec_eval/ranx definitions with every
gold passage at relevance 1, so ranx reproduces them from a run and qrels file.
"""
from __future__ import annotations

import math
from typing import Sequence


def passage_recall(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """``|top-k ∩ gold| / |gold|`` (0 when there is no gold)."""
    gold_set = set(gold)
    return len(gold_set.intersection(ranked[:k])) / len(gold_set) if gold_set else 0.0


def ndcg(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """nDCG@k with binary gains: ``sum 1/log2(rank+1)`` over gold in the top k, divided by the
    same sum for an ideal ranking (all gold first)."""
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, pid in enumerate(ranked[:k]) if pid in gold_set)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(gold_set))))
    return dcg / ideal


def reciprocal_rank(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """``1 / rank`` of the first gold passage in the top k, else 0 (its mean is MRR@k)."""
    gold_set = set(gold)
    for i, pid in enumerate(ranked[:k]):
        if pid in gold_set:
            return 1.0 / (i + 1)
    return 0.0
