"""The tree side of ``sirerag add``/``remove``: both trees updated over the stored pool, and an
embedder that reuses the rows an index already stores."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sirerag.core.config import BuildConfig
from sirerag.core.types import Chunk, Node, Proposition, Tree
from sirerag.embedding.base import Embedder
from sirerag.pipeline.models import Models


class TreeUpdate:
    """The two trees of the index being updated."""

    def __init__(self, entries: Sequence[Node], vectors: dict[str, np.ndarray], config: BuildConfig,
                 models: Models, *, refresh_threshold: float = 0.0, staleness: dict[str, int] | None = None) -> None:
        self.entries, self.vectors, self.config = entries, vectors, config
        self.models = models  # opened when a tree asks
        self.refresh_threshold = refresh_threshold
        self.staleness: dict[str, dict[str, int]] = {}  # tree -> summary id -> member tokens changed since written
        for node in entries:
            if staleness and node.id in staleness:
                self.staleness.setdefault(node.tree, {})[node.id] = int(staleness[node.id])
        self.levels: dict[str, list[list[Node]]] = {}
        self.stats: dict[str, Any] = {}
        self.written = 0

    def _update(self, name: Tree, base_kinds: tuple[str, ...], base: list[Node], summaries: bool) -> None:
        from sirerag.trees.incremental import old_levels, update_tree

        if not summaries:
            self.levels[name] = [base]
            return
        old = old_levels(self.entries, name, base_kinds)
        levels, stats = update_tree(old, base, self.vectors, tree_name=name, embedder=self.models.embedder(),
                                    summarizer=self.models.summarizer(), clustering=self.config.clustering,
                                    levels=self.config.tree.levels, random_state=self.config.seed,
                                    successors=_same_entity(old[0], base),
                                    refresh_threshold=self.refresh_threshold,
                                    staleness=self.staleness.setdefault(name, {}))
        self.levels[name] = levels
        self.stats[name] = stats.to_dict()
        self.written += stats.summaries_written

    def similarity(self, chunks: Sequence[Chunk]) -> None:
        base = [Node(id=c.id, text=c.text, kind="leaf", tree="similarity", level=0, passages=(c.doc_id,))
                for c in chunks]
        self._update("similarity", ("leaf",), base, "similarity" in self.config.trees)

    def relatedness(self, propositions: Sequence[Proposition], proposition_rows: np.ndarray) -> None:
        """Update the relatedness tree; new aggregates' vectors derive from ``proposition_rows`` (aligned
        with ``propositions``) unless the settings embed their texts."""
        from sirerag.trees.aggregates import build_aggregates
        from sirerag.trees.proposition_vectors import node_vectors

        relatedness = self.config.relatedness
        base = list(build_aggregates(propositions, max_tokens=relatedness.aggregate_max_tokens,
                                     skip_redundant=relatedness.skip_redundant_entities).nodes)
        missing = [n for n in base if n.id not in self.vectors]
        if missing:
            rows = node_vectors(missing, propositions, proposition_rows, self.models.embedder(),
                                mode=relatedness.aggregate_vectors)
            self.vectors.update({n.id: row for n, row in zip(missing, rows)})
        self._update("relatedness", ("aggregate",), base, relatedness.summaries)

    def stale(self) -> dict[str, int]:
        """Summary id -> member tokens changed since its text was written, over both trees (the
        manifest's ``staleness``; summaries without an entry are up to date)."""
        return {i: n for name in ("similarity", "relatedness") for i, n in self.staleness.get(name, {}).items()}

    def pool_order(self) -> list[list[Node]]:
        """One node list per tree, level by level (the build's pool order)."""
        return [[n for level in self.levels[name] for n in level] for name in ("similarity", "relatedness")
                if name in self.levels]


def _same_entity(old: Sequence[Node], new: Sequence[Node]) -> dict[str, list[str]]:
    """Old aggregate id -> the new aggregates of its entity, for aggregates that changed."""
    new_ids = {n.id for n in new}
    old_ids = {n.id for n in old}
    by_entity: dict[str, list[str]] = {}
    for node in new:
        if node.entity is not None and node.id not in old_ids:
            by_entity.setdefault(node.entity.casefold(), []).append(node.id)
    return {n.id: by_entity[n.entity.casefold()] for n in old
            if n.entity is not None and n.id not in new_ids and n.entity.casefold() in by_entity}


class KnownEmbedder:
    """An embedder that answers texts of the old graph (entity names, facts) from its stored rows and
    encodes only the others, so rebuilding the graph embeds only what is new, cache or not."""

    def __init__(self, inner: Embedder, rows: dict[str, np.ndarray]) -> None:
        self.inner, self.rows = inner, rows
        self.dim, self.spec = inner.dim, inner.spec

    @classmethod
    def from_graph(cls, inner: Embedder, old: "GraphRows | None") -> Embedder:
        """``inner`` answering the old graph's facts, and its names when ``inner`` embedded them (the graph
        records no name embedder of its own); ``inner`` itself when there is no old graph."""
        if old is None:
            return inner
        return cls(inner, {**(old.names if old.name_embedder is None else {}), **old.facts})

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """The rows of ``texts``: the known ones from their rows, the others encoded (and not kept: the graph
        asks for each name once, and a build's names are not held in memory)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self.rows))
        encoded = np.asarray(self.inner.encode_documents(missing), dtype=np.float32) if missing else None
        if encoded is not None and len(missing) == len(texts):  # no text known, none twice: the rows as encoded
            return encoded
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        at = {text: i for i, text in enumerate(missing)}
        for i, text in enumerate(texts):
            out[i] = self.rows[text] if text in self.rows else encoded[at[text]]  # type: ignore[index]
        return out

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.encode_queries(texts)


@dataclass(frozen=True)
class GraphRows:
    """An index's entity graph as rows by text: ``names`` (embedded by ``name_embedder``, the spec its
    ``graph.json`` records, or by the index embedder when None) and ``facts`` (by the index embedder)."""

    names: dict[str, np.ndarray]
    facts: dict[str, np.ndarray]
    name_embedder: str | None

    @classmethod
    def load(cls, folder: Path | None) -> "GraphRows | None":
        """The rows of the graph in ``folder``; None without a graph (or one this version cannot read)."""
        from sirerag.core.errors import IndexFormatError
        from sirerag.graph.store import load_graph

        if folder is None:
            return None
        try:
            graph, meta = load_graph(folder)
        except IndexFormatError:
            return None
        facts = dict(zip((f.text for f in graph.facts), graph.fact_embeddings)) \
            if len(graph.fact_embeddings) == len(graph.facts) else {}
        return cls(dict(zip(graph.entities, graph.entity_embeddings)), facts, meta.name_embedder)

    def name_embedder_for(self, names: Embedder | None) -> Embedder | None:
        """``names`` (the embedder of the new graph's names) answering the old names from their rows when the
        old graph's names were embedded by the same model; ``names`` itself otherwise."""
        if names is None or self.name_embedder != names.spec:
            return names
        return KnownEmbedder(names, self.names)
