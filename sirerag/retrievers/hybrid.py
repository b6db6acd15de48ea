"""Fusion of several retrievers (``--retriever dense+bm25``, ``dense+bm25+ppr``).

Two fusions:

* ``score`` (the default): each part's scores over its top ``depth`` entries are
  min-max normalised to [0, 1] (an entry missing from a part's list gets 0 from it)
  and summed with the part's weight;
* ``rrf``, reciprocal-rank fusion (Cormack et al., 2009): ``sum over parts of
  weight / (rrf_k + rank)`` with ranks from 1. It needs no score calibration but
  throws away how far apart the scores are.
"""
from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, Sequence

from sirerag.core.errors import ConfigError, check
from sirerag.retrievers.base import Closing, Hit, Retriever, SearchOne

if TYPE_CHECKING:
    from sirerag.pool.loaded import LoadedIndex

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


def score_fusion(results: Sequence[Sequence[Hit]], *,
                 weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Fuse scored hit lists by weighted sum of min-max normalised scores; ``(id, score)`` best
    first, ties in order of first appearance. A list of one score (or equal scores) counts 1."""
    weights = [1.0] * len(results) if weights is None else list(weights)
    check(len(weights) == len(results), "weights", weights, f"{len(results)} numbers, one per ranking")
    scores: dict[str, float] = {}
    for hits, weight in zip(results, weights):
        if not hits:
            continue
        values = [h.score for h in hits]
        lo, hi = min(values), max(values)
        for hit in hits:
            norm = 1.0 if hi - lo <= 1e-12 else (hit.score - lo) / (hi - lo)
            scores[hit.entry_id] = scores.get(hit.entry_id, 0.0) + weight * norm
    first = {entry_id: i for i, entry_id in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], first[kv[0]]))


FUSIONS = ("score", "rrf")


class FusionRetriever(SearchOne, Closing):
    """Ranks entries by fusing its parts' rankings.

    Args:
        parts: the retrievers to fuse.
        fusion: ``score`` (min-max normalised score sum) or ``rrf``.
        weights: one weight per part (default all 1).
        rrf_k: the RRF constant (60 in the original paper).
        depth: entries taken from each part (at least the ``k`` asked for).
    """

    def __init__(self, parts: Sequence[Retriever], *, fusion: str = "score", weights: Sequence[float] | None = None,
                 rrf_k: float = 60.0, depth: int = 100) -> None:
        check(len(parts) >= 2, "parts", len(parts), "at least two retrievers")
        check(fusion in FUSIONS, "fusion", fusion, f"one of {FUSIONS}")
        check(weights is None or (len(weights) == len(parts) and all(float(w) >= 0 for w in weights)),
              "fusion_weights", weights, f"{len(parts)} numbers >= 0, one per part")
        check(rrf_k >= 0, "rrf_k", rrf_k, "a number >= 0")
        check(isinstance(depth, int) and depth >= 1, "depth", depth, "a positive integer")
        self.parts = list(parts)
        self.fusion = fusion
        self.weights = [float(w) for w in weights] if weights is not None else None
        self.rrf_k = float(rrf_k)
        self.depth = depth
        self.name = "+".join(p.name for p in self.parts)

    def owned(self) -> Sequence[Retriever]:
        return self.parts

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        depth = max(k, self.depth)
        per_part = [part.search_many(queries, depth) for part in self.parts]
        out = []
        for q in range(len(queries)):
            if self.fusion == "rrf":
                fused = reciprocal_rank_fusion([[h.entry_id for h in hits[q]] for hits in per_part],
                                               rrf_k=self.rrf_k, weights=self.weights)
            else:
                fused = score_fusion([hits[q] for hits in per_part], weights=self.weights)
            out.append([Hit(entry_id, score) for entry_id, score in fused[:k]])
        return out


def load(name: str, index: LoadedIndex, *, fusion: str = "score", fusion_weights: Sequence[float] | None = None,
         rrf_k: float = 60.0, fusion_depth: int = 100,
         **options: Any) -> FusionRetriever:  # Any: each part's options, checked by load_retriever
    """Build ``a+b[+c...]`` over a loaded index; every part gets the options it takes.

    The index embedder is loaded once and shared by the parts that need it.

    Raises:
        ConfigError: a part is empty, repeated or unknown.
    """
    from sirerag.retrievers.registry import RETRIEVERS, load_base, options_of
    from sirerag.retrievers.dense import index_embedder

    names = [n.strip() for n in name.split("+")]
    if len(names) < 2 or any(not n for n in names) or len(set(names)) != len(names):
        raise ConfigError(f"a fusion retriever must name two or more distinct retrievers like 'dense+ppr', got {name!r}")
    unknown = [n for n in names if n not in RETRIEVERS]
    if unknown:
        raise ConfigError(f"unknown retriever(s) {unknown} in {name!r}; allowed: {sorted(RETRIEVERS)}")
    if options.get("embedder") is None and any(n in ("dense", "ppr") for n in names):
        options["embedder"] = index_embedder(index)
    parts = [load_base(n, index, **{k: v for k, v in options.items() if k in options_of(n)}) for n in names]
    return FusionRetriever(parts, fusion=fusion, weights=fusion_weights, rrf_k=rrf_k, depth=fusion_depth)


#: The fusion's own options: the keywords of :func:`load` (the other keywords are the parts' options).
FUSION_OPTIONS = frozenset(p.name for p in inspect.signature(load).parameters.values()
                           if p.kind is inspect.Parameter.KEYWORD_ONLY)
