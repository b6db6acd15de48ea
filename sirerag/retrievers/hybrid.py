"""Reciprocal-rank fusion of several retrievers (``--retriever dense+ppr``).

RRF (Cormack et al., 2009) scores an entry ``sum over retrievers of 1 / (rrf_k + rank)``
with ranks from 1; entries missing from a retriever's list get nothing from it.
It needs no score calibration between the fused retrievers, which is why it is the
usual way to combine dense, lexical and graph rankings.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

from sirerag.errors import ConfigError, check
from sirerag.retrievers.base import Hit, Retriever

logger = logging.getLogger(__name__)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], *, rrf_k: float = 60.0,
                           weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Fuse ranked id lists; returns ``(id, score)`` best first.

    Ties keep the order in which ids first appear (rankings in order, best rank first).
    """
    check(rrf_k >= 0, "rrf_k", rrf_k, "a number >= 0")
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    check(len(weights) == len(rankings), "weights", weights, f"{len(rankings)} numbers, one per ranking")
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, entry_id in enumerate(ranking, start=1):
            scores[entry_id] = scores.get(entry_id, 0.0) + weight / (rrf_k + rank)
    first = {entry_id: i for i, entry_id in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], first[kv[0]]))


class FusionRetriever:
    """Ranks entries by reciprocal-rank fusion of its parts' rankings.

    Args:
        parts: the retrievers to fuse.
        rrf_k: the RRF constant (60 in the original paper).
        depth: entries taken from each part (at least the ``k`` asked for).
    """

    def __init__(self, parts: Sequence[Retriever], *, rrf_k: float = 60.0, depth: int = 100) -> None:
        check(len(parts) >= 2, "parts", len(parts), "at least two retrievers")
        check(rrf_k >= 0, "rrf_k", rrf_k, "a number >= 0")
        check(isinstance(depth, int) and depth >= 1, "depth", depth, "a positive integer")
        self.parts = list(parts)
        self.rrf_k = float(rrf_k)
        self.depth = depth
        self.name = "+".join(p.name for p in self.parts)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        depth = max(k, self.depth)
        per_part = [part.search_many(queries, depth) for part in self.parts]
        out = []
        for q in range(len(queries)):
            fused = reciprocal_rank_fusion([[h.entry_id for h in hits[q]] for hits in per_part], rrf_k=self.rrf_k)
            out.append([Hit(entry_id, score) for entry_id, score in fused[:k]])
        return out


def load(name: str, index: Any, *, rrf_k: float = 60.0, fusion_depth: int = 100, **options: Any) -> FusionRetriever:
    """Build ``a+b[+c...]`` over a loaded index; every part gets the same options.

    The index embedder is loaded once and shared by the parts that need it.

    Raises:
        ConfigError: a part is empty, repeated or unknown.
    """
    from sirerag.retrievers import RETRIEVERS, load_retriever
    from sirerag.retrievers.dense import index_embedder

    names = [n.strip() for n in name.split("+")]
    if len(names) < 2 or any(not n for n in names) or len(set(names)) != len(names):
        raise ConfigError(f"a fusion retriever must name two or more distinct retrievers like 'dense+ppr', got {name!r}")
    unknown = [n for n in names if n not in RETRIEVERS]
    if unknown:
        raise ConfigError(f"unknown retriever(s) {unknown} in {name!r}; allowed: {sorted(RETRIEVERS)}")
    if options.get("embedder") is None and any(n in ("dense", "ppr") for n in names):
        options["embedder"] = index_embedder(index)
    parts = [load_retriever(n, index, **options) for n in names]
    return FusionRetriever(parts, rrf_k=rrf_k, depth=fusion_depth)
