"""The build's memory-bounded writers change no byte: a build whose pool is written in blocks from the trees and
read back lazily, whose vectors are read back memory-mapped and whose graph writes its entity-name vectors in
slices writes the same index files as one that stacks the pool in memory, keeps its entries and every vector and
embeds the names in one call (what the build did before)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from sirerag.core.config import BuildConfig, GraphConfig
from sirerag.pipeline.build import build_index
from sirerag.pipeline.stages import BuildRunner, IndexWriter
from sirerag.pool.store import flatten
from tests._tiny_index import write_sample

#: written with the build's seconds in them
TIMED = {"manifest.json", "graph/graph.json"}


def _in_memory_pool(self: BuildRunner, stage) -> None:  # noqa: ANN001
    from sirerag.trees.similarity import leaves_from_chunks

    trees = [self.trees.get("similarity") or leaves_from_chunks(self.chunks, self.leaf_embeddings)]
    self.write_pool(flatten(trees + [self.trees[t] for t in ("relatedness",) if t in self.trees]))


def _in_memory_vectors(self: IndexWriter, rows: np.ndarray) -> None:
    from sirerag.trees.proposition_vectors import save_proposition_vectors

    save_proposition_vectors(self.out, rows)
    self.proposition_vectors = np.asarray(rows, dtype=np.float32)
    self.components["proposition_vectors"] = {"type": "proposition_vectors", "path": "propositions.npy",
                                              "rows": int(rows.shape[0]),
                                              "embedder": self.models.short_text_embedder().spec}


class _NamesInMemory:
    """The graph's names embedded in one call and held in memory; ``save_graph`` writes their file."""

    def __init__(self, directory: Path) -> None:
        self.written = False

    def __call__(self, embedder, names, eligible):  # noqa: ANN001, ANN204
        from sirerag.graph.build import names_in_memory

        return names_in_memory(embedder, names, eligible)


def _digests(index: Path) -> dict[str, str]:
    return {str(p.relative_to(index)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(index.rglob("*")) if p.is_file() and "cache" not in p.relative_to(index).parts}


@pytest.mark.slow  # two builds of 24 passages with MiniLM: about 45 s
def test_the_streamed_build_writes_the_files_of_the_in_memory_build(tmp_path, monkeypatch) -> None:
    corpus = write_sample(tmp_path / "corpus.jsonl", 24)
    config = BuildConfig(seed=7, graph=GraphConfig(enabled=True))  # both trees and the graph
    cache = tmp_path / "cache"  # shared: the second build embeds nothing
    build_index(corpus, tmp_path / "streamed", config, cache_dir=cache, show_progress=False)
    with monkeypatch.context() as patch:
        patch.setattr(BuildRunner, "pool", _in_memory_pool)
        patch.setattr(IndexWriter, "write_proposition_vectors", _in_memory_vectors)
        patch.setattr("sirerag.graph.store.NameVectorWriter", _NamesInMemory)
        build_index(corpus, tmp_path / "in-memory", config, cache_dir=cache, show_progress=False)
    streamed, in_memory = _digests(tmp_path / "streamed"), _digests(tmp_path / "in-memory")
    assert {"entries.jsonl", "embeddings.npy", "propositions.npy", "graph/entity_embeddings.npy"} <= set(streamed)
    assert streamed.keys() == in_memory.keys()
    assert {k: v for k, v in streamed.items() if k not in TIMED} == \
        {k: v for k, v in in_memory.items() if k not in TIMED}
