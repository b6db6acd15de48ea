"""The similarity + keyword chunk graph of the BABILong blog post (sirerag.graph.keyword_graph): its matrices and
its search on hand-made embeddings. The retriever over an index: tests/test_keyword_graph_retriever.py."""
from __future__ import annotations

import numpy as np
import pytest

from sirerag.core.config import KeywordGraphConfig
from sirerag.core.errors import ConfigError
from sirerag.graph.keyword_graph import KeywordGraph, chunk_adjacency, keyword_matrix, passage_keywords

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
    dense = KeywordGraph(x, STORY_KEYWORDS, KeywordGraphConfig(mode="dense"))
    assert dense.retrieve(query, 3) == [0, 1, 2]  # misses Daniel's last move (4)
    for mode in ("ppr", "hop"):
        got = KeywordGraph(x, STORY_KEYWORDS, KeywordGraphConfig(mode=mode, seeds=1)).retrieve(query, 3)
        assert got == [0, 2, 4]  # Daniel's moves, through the shared keyword, in story order
    with pytest.raises(ConfigError, match="keyword_graph.mode must be one of 'ppr', 'hop', 'dense', got 'bfs'"):
        KeywordGraph(x, STORY_KEYWORDS, KeywordGraphConfig(mode="bfs"))


def test_a_batch_of_queries_scores_as_each_query_alone():
    x = story_embeddings()
    for mode in ("ppr", "hop", "dense"):
        graph = KeywordGraph(x, STORY_KEYWORDS, KeywordGraphConfig(mode=mode, seeds=2))
        batch = graph.scores(x[[0, 3]])
        assert batch.shape == (2, 5)
        np.testing.assert_allclose(batch[1], graph.scores(x[3]), atol=1e-5)  # PageRank stops at tol 1e-6
        np.testing.assert_allclose(batch[0], graph.scores(x[0]), atol=1e-5)


def test_passage_keywords_from_the_tagger_and_the_content_words():
    texts = ["Daniel picked up the football.", "Mary went to the garden.", "Daniel went to the kitchen."]
    entities, content, both = (passage_keywords(texts, source) for source in ("entities", "content", "both"))
    assert entities[0] == {"daniel"} and entities[1] == {"mary"}
    assert content[0] == {"daniel", "picked", "football"} and content[2] == {"daniel", "went", "kitchen"}
    assert both == [e | c for e, c in zip(entities, content)]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("seeds", 0, "keyword_graph.seeds must be an integer >= 1, got 0"),
    ("damping", 1.0, r"keyword_graph.damping must be a number in \[0, 1\), got 1.0"),
    ("keywords", "nouns", "keyword_graph.keywords must be one of 'entities', 'content', 'both', got 'nouns'"),
    ("max_passages", 0, "keyword_graph.max_passages must be an integer >= 1, got 0"),
    ("seeds", "2", "keyword_graph.seeds must be an integer, got '2'"),
])
def test_the_settings_are_checked(field, value, message):
    with pytest.raises(ConfigError, match=message):
        KeywordGraphConfig(**{field: value}).validate()
