"""The offline summariser: centroid sentence extraction with a redundancy penalty.

For each group of texts the sentences are scored by the cosine similarity of
their TF-IDF vector to the group's centroid (the mean of its unit sentence
vectors), and picked greedily by maximal marginal relevance: ``lambda * relevance
- (1 - lambda) * max similarity to a sentence already picked``. A sentence is
taken only while it fits the remaining token budget; the picks are emitted in
their original order. If the best sentence alone is over the budget, it is cut
on a token boundary. IDF weights are fitted once on the sentences of all groups
of a call, so one call per tree level gives level-wide term statistics.

It is an extractive algorithm, not an abstractive summary: its output is made of
input sentences only. The index manifest records it as ``extractive:centroid``.
"""
from __future__ import annotations

import logging
import re
from typing import Sequence

import numpy as np

from sirerag.text.chunking import sentence_spans
from sirerag.core.errors import check
from sirerag.text.tokens import count_tokens, get_encoding
from sirerag.core.types import collapse_ws

logger = logging.getLogger(__name__)

#: Weight of relevance against redundancy in the greedy pick (MMR's lambda).
MMR_LAMBDA = 0.7
#: Pieces with fewer words (titles, list labels) are picked only when a group has nothing longer.
MIN_WORDS = 4
_WORD = re.compile(r"\w+")


class ExtractiveSummarizer:
    """Extractive centroid summaries of at most ``max_tokens`` tokens.

    Args:
        max_tokens: token budget of each summary (in ``encoding``).
        encoding: the tiktoken encoding used to count tokens.

    Raises:
        ConfigError: ``max_tokens`` is not a positive integer (raised at construction,
            since there is no other work to defer).
    """

    def __init__(self, max_tokens: int = 100, encoding: str = "cl100k_base") -> None:
        check(isinstance(max_tokens, int) and max_tokens >= 1, "max_tokens", max_tokens, "a positive integer")
        self.max_tokens = max_tokens
        self.encoding = encoding

    @property
    def spec(self) -> str:
        return "extractive:centroid"

    def summarize(self, groups: Sequence[Sequence[str]]) -> list[str]:
        """Summarise each group of texts; returns one summary per group, in order.

        A group without any text gives an empty summary.
        """
        from sklearn.feature_extraction.text import TfidfVectorizer

        sentences: list[list[str]] = [_sentences(group) for group in groups]
        flat = [s for group in sentences for s in group]
        if not flat:
            return ["" for _ in groups]
        enc = get_encoding(self.encoding)
        counts = [len(enc.encode(s, disallowed_special=())) for s in flat]
        vectorizer = TfidfVectorizer(lowercase=True, stop_words="english", sublinear_tf=True, dtype=np.float32)
        try:
            matrix = vectorizer.fit_transform(flat)
        except ValueError:  # every sentence is made only of stop words or symbols
            matrix = None
        out: list[str] = []
        start = 0
        for group in sentences:
            stop = start + len(group)
            rows = matrix[start:stop] if matrix is not None else None
            out.append(self._summarize_one(group, rows, counts[start:stop]))
            start = stop
        return out

    def _summarize_one(self, sentences: list[str], rows, counts: list[int]) -> str:  # noqa: ANN001 - sparse
        if not sentences:
            return ""
        if rows is None:
            relevance = np.zeros(len(sentences), dtype=np.float32)
            similarity = np.zeros((len(sentences), len(sentences)), dtype=np.float32)
        else:
            relevance = _centroid_relevance(rows)
            similarity = (rows @ rows.T).toarray()
        eligible = np.array([len(_WORD.findall(s)) >= MIN_WORDS for s in sentences])
        if not eligible.any():
            eligible[:] = True
        picked = _mmr_pick(relevance, similarity, counts, self.max_tokens, eligible)
        if not picked:  # the best sentence alone is over the budget
            return self._truncate(sentences[int(np.argmax(np.where(eligible, relevance, -np.inf)))])
        while True:
            text = " ".join(sentences[i] for i in sorted(picked))
            # BPE merges across the joins can add a token; drop the last pick until it fits
            if len(picked) == 1 or count_tokens(text, self.encoding) <= self.max_tokens:
                return text
            picked.pop()

    def _truncate(self, sentence: str) -> str:
        enc = get_encoding(self.encoding)
        tokens = enc.encode(sentence, disallowed_special=())
        keep = self.max_tokens
        while keep > 0:
            text = enc.decode_bytes(tokens[:keep]).decode("utf-8", errors="ignore").strip()
            if count_tokens(text, self.encoding) <= self.max_tokens:
                return text
            keep -= 1
        return ""


def _sentences(group: Sequence[str]) -> list[str]:
    """The distinct sentences of a group's texts, in order (white space collapsed)."""
    seen: set[str] = set()
    out: list[str] = []
    for text in group:
        for a, b in sentence_spans(text):
            sentence = collapse_ws(text[a:b])
            if sentence and sentence not in seen:
                seen.add(sentence)
                out.append(sentence)
    return out


def _centroid_relevance(rows) -> np.ndarray:  # noqa: ANN001 - a sparse matrix
    """Cosine similarity of each (unit or zero) sparse row to the mean row."""
    centroid = np.asarray(rows.mean(axis=0)).ravel()
    norm = float(np.linalg.norm(centroid))
    if norm == 0.0:
        return np.zeros(rows.shape[0], dtype=np.float32)
    return np.asarray(rows @ (centroid / norm)).ravel()


def _mmr_pick(relevance: np.ndarray, similarity: np.ndarray, counts: Sequence[int], budget: int,
              eligible: np.ndarray) -> list[int]:
    """Greedy maximal-marginal-relevance selection among ``eligible`` sentences under a
    token budget.

    Returns the picked indices in pick order; empty if the most relevant sentence
    does not fit on its own. Ties go to the earlier sentence.
    """
    n = len(relevance)
    cost = np.asarray(counts)
    available = eligible.copy()
    redundancy = np.zeros(n, dtype=np.float32)
    picked: list[int] = []
    remaining = budget
    first = int(np.argmax(np.where(available, relevance, -np.inf)))
    if cost[first] > budget:
        return []
    while True:
        candidates = available & (cost <= remaining)
        if not candidates.any():
            return picked
        score = MMR_LAMBDA * relevance - (1.0 - MMR_LAMBDA) * redundancy
        best = int(np.argmax(np.where(candidates, score, -np.inf)))
        picked.append(best)
        available[best] = False
        remaining -= int(cost[best])
        redundancy = np.maximum(redundancy, similarity[best])
