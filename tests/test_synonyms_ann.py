"""Synonym edges through HNSW (``graph.synonym_ann_min_names``): the same edges as the exact kNN on names
that form small groups of near-duplicates, crowded names (more near-duplicates than the probe) searched
exactly, the graph's stats saying which search ran, and the setting checked."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("usearch")

from sirerag.core.config import DenseConfig, GraphConfig  # noqa: E402
from sirerag.core.errors import ConfigError  # noqa: E402
from sirerag.core.types import Proposition  # noqa: E402
from sirerag.graph.build import build_graph  # noqa: E402
from sirerag.graph.synonyms import SYNONYM_PROBE, synonym_edges  # noqa: E402


def _groups(sizes: list[int], dim: int = 48, spread: float = 0.15, seed: int = 0) -> np.ndarray:
    """L2-normalised rows: one random centre per group, each member the centre plus noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for size in sizes:
        centre = rng.normal(size=dim)
        centre /= np.linalg.norm(centre)
        rows.append(centre + spread / np.sqrt(dim) * rng.normal(size=(size, dim)))
    x = np.concatenate(rows).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _pairs(result: tuple[np.ndarray, np.ndarray, np.ndarray]) -> set[tuple[int, int]]:
    return set(zip(result[0].tolist(), result[1].tolist()))


def test_hnsw_synonyms_match_the_exact_ones() -> None:
    x = _groups([1, 2, 3, 4, 5] * 60)
    exact = synonym_edges(x, threshold=0.8, max_neighbors=100)
    approx = synonym_edges(x, threshold=0.8, max_neighbors=100, ann=DenseConfig())
    assert len(exact[0]) > 500
    assert _pairs(approx) == _pairs(exact)
    order = np.lexsort((approx[1], approx[0]))
    same = np.lexsort((exact[1], exact[0]))
    np.testing.assert_allclose(approx[2][order], exact[2][same], rtol=1e-5)


def test_a_crowded_name_is_searched_exactly() -> None:
    # one group larger than the probe: every member has more near-duplicates than an HNSW search asks for
    big = SYNONYM_PROBE + 9
    x = _groups([big, 3, 2, 1] * 5, seed=1)
    for k in (100, 4):
        exact = synonym_edges(x, threshold=0.8, max_neighbors=k)
        approx = synonym_edges(x, threshold=0.8, max_neighbors=k, ann=DenseConfig())
        assert _pairs(approx) == _pairs(exact)
        degree = np.bincount(np.concatenate(approx[:2]), minlength=len(x))
        assert degree.max() == min(k, big - 1)


class _Names:
    """Embeds names by a fixed table: two near-duplicate pairs and one name apart."""

    spec = "names"
    dim = 3
    table = {"Clara Peeters": [1, 0, 0], "Clara Peters": [1, 0.1, 0], "Antwerp": [0, 1, 0],
             "Antwerpen": [0, 1, 0.15], "Flanders": [0, 0, 1]}

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        rows = np.asarray([self.table[t] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    encode_queries = encode_documents


def test_the_graph_records_an_hnsw_synonym_search() -> None:
    props = [Proposition(id=f"f{i}", text=f"fact {i}", entities=(name,), chunk_id=f"c{i % 3}", doc_id=f"d{i % 3}",
                         index=i) for i, name in enumerate(_Names.table)]
    passages = ["d0", "d1", "d2"]
    forced = build_graph(passages, props, embedder=_Names(), embed_facts=False, synonym_ann_min_names=0)
    above = build_graph(passages, props, embedder=_Names(), embed_facts=False, synonym_ann_min_names=6)  # 5 names: exact
    assert forced.stats["synonym_search"] == "hnsw"
    assert "synonym_search" not in above.stats
    assert forced.stats["synonym_edges"] == above.stats["synonym_edges"] == 2
    assert (forced.adjacency != above.adjacency).nnz == 0


def test_the_setting_is_checked() -> None:
    with pytest.raises(ConfigError, match="graph.synonym_ann_min_names"):
        GraphConfig(synonym_ann_min_names=-2).validate()
