"""Metrics comparing a student extractor's output with the teacher's.

Pure functions over strings and lists, no model: token-level F1 and ROUGE-L
between two texts, precision/recall/F1 of sets, and a one-to-one matching of
predicted propositions to reference propositions (the Hungarian algorithm on a
similarity matrix, pairs below a threshold left unmatched).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from sirerag.evaluation.text import overlap_f1

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (runs of letters/digits/underscore); punctuation dropped."""
    return _TOKEN.findall(text.lower())


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD-style bag-of-tokens F1 between two texts (1.0 when both are empty)."""
    return overlap_f1(tokenize(prediction), tokenize(reference))


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 (longest common subsequence of tokens, beta = 1); 1.0 when both are empty."""
    pred, ref = tokenize(prediction), tokenize(reference)
    if not pred or not ref:
        return float(pred == ref)
    lcs = _lcs_length(pred, ref)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(pred), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


SIMILARITIES: dict[str, Callable[[str, str], float]] = {"token_f1": token_f1, "rouge_l": rouge_l}


@dataclass(frozen=True)
class PRF:
    """Counts behind precision/recall/F1, so that they add up across examples (micro average)."""

    true_positives: int = 0
    n_predicted: int = 0
    n_reference: int = 0

    def __add__(self, other: "PRF") -> "PRF":
        return PRF(self.true_positives + other.true_positives, self.n_predicted + other.n_predicted,
                   self.n_reference + other.n_reference)

    @property
    def precision(self) -> float:
        """``tp / n_predicted``; 1.0 when nothing was predicted and nothing was expected, else 0.0."""
        if self.n_predicted == 0:
            return float(self.n_reference == 0)
        return self.true_positives / self.n_predicted

    @property
    def recall(self) -> float:
        """``tp / n_reference``; 1.0 when there was nothing to find."""
        if self.n_reference == 0:
            return 1.0
        return self.true_positives / self.n_reference

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)

    def as_dict(self) -> dict[str, float | int]:
        return {"precision": round(self.precision, 4), "recall": round(self.recall, 4), "f1": round(self.f1, 4),
                "true_positives": self.true_positives, "n_predicted": self.n_predicted,
                "n_reference": self.n_reference}


def set_prf(predicted: Iterable[str], reference: Iterable[str]) -> PRF:
    """Exact-match counts between two sets of (already normalised) strings; duplicates count once."""
    pred, ref = set(predicted), set(reference)
    return PRF(len(pred & ref), len(pred), len(ref))


@dataclass(frozen=True)
class Matching:
    """A one-to-one matching: ``pairs`` of (predicted index, reference index, similarity)."""

    pairs: tuple[tuple[int, int, float], ...]
    counts: PRF

    @property
    def mean_similarity(self) -> float:
        """Mean similarity of the matched pairs (0.0 when none matched)."""
        return float(np.mean([s for _, _, s in self.pairs])) if self.pairs else 0.0


def match_propositions(
    predicted: Sequence[str],
    reference: Sequence[str],
    *,
    similarity: str = "token_f1",
    threshold: float = 0.5,
) -> Matching:
    """Match predicted propositions to reference propositions one-to-one.

    The assignment maximises the total similarity (Hungarian algorithm); a pair
    counts as a match only when its similarity is at least ``threshold``.

    Args:
        predicted: the student's propositions.
        reference: the teacher's propositions.
        similarity: ``token_f1`` or ``rouge_l``.
        threshold: minimum similarity of a matched pair, in (0, 1].

    Returns:
        The matched pairs and the counts for precision (matched / predicted) and
        recall (matched / reference).

    Raises:
        ValueError: unknown ``similarity`` or ``threshold`` out of range.
    """
    if similarity not in SIMILARITIES:
        raise ValueError(f"similarity must be one of {sorted(SIMILARITIES)}, got {similarity!r}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    if not predicted or not reference:
        return Matching((), PRF(0, len(predicted), len(reference)))
    from scipy.optimize import linear_sum_assignment

    score = SIMILARITIES[similarity]
    matrix = np.array([[score(p, r) for r in reference] for p in predicted], dtype=np.float64)
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    pairs = tuple((int(i), int(j), float(matrix[i, j])) for i, j in zip(rows, cols) if matrix[i, j] >= threshold)
    return Matching(pairs, PRF(len(pairs), len(predicted), len(reference)))
