"""Answer normalisation shared by every metric (SQuAD's official rules)."""
from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)
YES_NO = frozenset({"yes", "no"})


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, collapse white space."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


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
