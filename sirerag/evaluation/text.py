"""Answer normalisation shared by every metric (SQuAD's official rules)."""
from __future__ import annotations

import re
import string
from collections import Counter
from typing import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)
YES_NO = frozenset({"yes", "no"})


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, collapse white space."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def overlap_f1(prediction: Sequence[str], reference: Sequence[str]) -> float:
    """SQuAD's bag-of-tokens F1 between two token lists (1.0 when both are empty, 0.0 when one is)."""
    if not prediction or not reference:
        return float(not prediction and not reference)
    common = sum((Counter(prediction) & Counter(reference)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(prediction), common / len(reference)
    return 2 * precision * recall / (precision + recall)


def is_yes_no(answers: list[str] | tuple[str, ...]) -> bool:
    """True when the gold answer is yes or no (such answers occur in any text by chance)."""
    return bool(answers) and normalize_answer(answers[0]) in YES_NO


def contains_answer(text: str, answers: list[str] | tuple[str, ...]) -> bool:
    """True when any normalised answer occurs in the normalised text as a whole-word span."""
    haystack = f" {normalize_answer(text)} "
    for answer in answers:
        needle = normalize_answer(answer)
        if needle and f" {needle} " in haystack:
            return True
    return False
