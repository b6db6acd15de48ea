"""The similarity + keyword chunk graph of the BABILong blog post (benchmarks/keyword_graph.py, used by the
bAbI benchmark)."""
from __future__ import annotations

import numpy as np
import pytest

from sirerag.core.errors import ConfigError
from benchmarks.keyword_graph import KeywordGraphRetriever, chunk_adjacency, keyword_matrix

# a bAbI-like story: the football is picked up by Daniel (0), who then moves (2, 4); others move too
STORY_KEYWORDS = [{"daniel", "football"}, {"mary"}, {"daniel", "kitchen"}, {"mary", "garden"}, {"daniel", "office"}]


def story_embeddings() -> np.ndarray:
    x = np.array([[1.0, 0.1, 0, 0], [0, 1, 0, 0.2], [0.1, 0, 1, 0], [0, 0.9, 0.3, 0], [0, 0, 0.8, 0.6]])
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_keyword_matrix_and_adjacency():
    k = keyword_matrix(STORY_KEYWORDS)
    assert k[0, 2] == k[2, 4] == k[1, 3] == 1.0 and k[0, 1] == 0.0 and np.all(np.diag(k) == 0)
    x = story_embeddings()
    a = chunk_adjacency(x, STORY_KEYWORDS)
    expected = 0.5 * (np.clip(x @ x.T, 0, None) + k)
    np.fill_diagonal(expected, 0)
    np.testing.assert_allclose(a, expected)
    np.testing.assert_allclose(a, a.T)


def test_graph_retrieval_reaches_the_holder_and_keeps_story_order():
    x = story_embeddings()
    query = x[0]  # "where is the football?" matches only the pick-up sentence
    dense = KeywordGraphRetriever(x, STORY_KEYWORDS, mode="dense")
    assert dense.retrieve(query, 3) == [0, 1, 2]  # misses Daniel's last move (4)
    for mode in ("ppr", "hop"):
        got = KeywordGraphRetriever(x, STORY_KEYWORDS, mode=mode, seeds=1).retrieve(query, 3)
        assert got == [0, 2, 4]  # Daniel's moves, through the shared keyword, in story order
    with pytest.raises(ConfigError, match="mode"):
        KeywordGraphRetriever(x, STORY_KEYWORDS, mode="bfs")
