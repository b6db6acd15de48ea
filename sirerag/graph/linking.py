"""Query linking: from a query to the reset probabilities of Personalized PageRank.

Two modes, as compared in HippoRAG 2 (section 3.3, appendix G.1):

* ``ner`` (HippoRAG v1, "NER to node"): the entities found in the query are each
  linked to their most similar entity node by embedding; a linked node gets the
  weight ``1 / (number of passages containing it)`` (node specificity).
* ``fact`` (HippoRAG 2, "query to triple"): the query embedding is scored against
  every fact (proposition) embedding and the scores are min-max normalised; the
  entities of the top facts get weight ``mean over those facts of (fact score /
  number of passages containing the entity)`` and the ``top_entities`` strongest
  are kept. An optional recognition filter removes irrelevant facts first.

Either mode may add passage seeds: every passage node gets its min-max normalised
dense score times ``passage_weight`` (HippoRAG 2 uses the value PPRSettings keeps as its default).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from sirerag.graph.build import EntityGraph


@dataclass(frozen=True)
class Bridge:
    """An entity reached by query-conditioned bridging: its node, the hop (1 = from a seed), the entity
    node it came from, the proposition that names both (its text), that proposition's cosine with
    the query and its passage node (-1: not known)."""

    node: int
    hop: int
    via: int
    text: str
    score: float
    passage: int = -1


@dataclass
class Seeds:
    """The linking result of one query.

    Attributes:
        entities: entity node -> reset weight (before normalisation).
        facts: ``(fact index, normalised score)`` of the facts used, best first.
        candidates: the facts considered before the recognition filter.
        query_entities: for ``ner``: ``(query entity, linked node, cosine)``.
        bridges: entities added by bridging (their weights are in ``entities`` too).
        passages: passage node -> reset weight: the passages a bridged entity titles
            (:class:`~sirerag.graph.bridging.BridgeSettings` ``title_passages``).
    """

    entities: dict[int, float] = field(default_factory=dict)
    facts: list[tuple[int, float]] = field(default_factory=list)
    candidates: list[tuple[int, float]] = field(default_factory=list)
    query_entities: list[tuple[str, int, float]] = field(default_factory=list)
    bridges: list[Bridge] = field(default_factory=list)
    passages: dict[int, float] = field(default_factory=dict)


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a constant vector maps to ones."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    return np.ones_like(scores) if hi - lo <= 1e-12 else (scores - lo) / (hi - lo)


def specificity(graph: EntityGraph, node: int) -> float:
    """Node specificity ``1 / |passages of the entity|`` (1 for an entity in no passage)."""
    return 1.0 / max(int(graph.entity_passages[node]), 1)


def ner_seeds(graph: EntityGraph, query_entities: Sequence[str], entity_embeddings: np.ndarray) -> Seeds:
    """Link each query entity to its most similar entity node (``ner`` mode).

    Args:
        graph: the entity graph with entity embeddings.
        query_entities: normalised entities found in the query.
        entity_embeddings: ``(len(query_entities), dim)`` L2-normalised rows, embedded
            like the graph's entity names.
    """
    seeds = Seeds()
    if not len(query_entities) or graph.n_entities == 0:
        return seeds
    sims = np.asarray(entity_embeddings, dtype=np.float32) @ graph.entity_embeddings.T
    for name, row in zip(query_entities, sims):
        node = int(np.argmax(row))
        seeds.query_entities.append((name, node, float(row[node])))
        seeds.entities[node] = specificity(graph, node)
    return seeds


def surface_seeds(graph: EntityGraph, matches: Sequence[tuple[str, int]], rest: Sequence[str],
                  rest_embeddings: np.ndarray) -> Seeds:
    """Seeds from longest-match surface links (``ner`` with a surface index).

    Args:
        graph: the entity graph.
        matches: ``(matched text, node)`` of the query's longest non-overlapping
            surface matches (:class:`~sirerag.graph.surface.SurfaceIndex`).
        rest: tagger entities of the query not covered by a match; each is linked to
            its nearest entity node by embedding, as in :func:`ner_seeds`.
        rest_embeddings: ``(len(rest), dim)`` L2-normalised rows.

    Every linked node gets its specificity ``1 / passages`` as weight.
    """
    seeds = ner_seeds(graph, rest, rest_embeddings) if len(rest) else Seeds()
    for text, node in matches:
        seeds.query_entities.append((text, int(node), 1.0))
        seeds.entities[int(node)] = specificity(graph, int(node))
    return seeds


def top_facts(graph: EntityGraph, query_embedding: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` facts most similar to the query, with min-max normalised scores, best first."""
    if not graph.facts or k <= 0:
        return []
    scores = min_max(graph.fact_embeddings @ np.asarray(query_embedding, dtype=np.float32))
    k = min(k, scores.size)
    part = np.argpartition(-scores, k - 1)[:k]
    order = part[np.lexsort((part, -scores[part]))]
    return [(int(i), float(scores[i])) for i in order]


def fact_seeds(graph: EntityGraph, facts: Sequence[tuple[int, float]], top_entities: int) -> Seeds:
    """Entity seeds of the kept facts (``fact`` mode): each entity's weight is the mean
    over the facts that mention it of ``fact score / passage count``; the
    ``top_entities`` largest positive weights are kept (ties: lower node first)."""
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for index, score in facts:
        for node in graph.facts[index].entities:
            sums[node] = sums.get(node, 0.0) + score * specificity(graph, node)
            counts[node] = counts.get(node, 0) + 1
    weights = {node: sums[node] / counts[node] for node in sums if sums[node] > 0}
    best = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[: max(top_entities, 0)]
    return Seeds(entities=dict(best), facts=list(facts))


def reset_entries(graph: EntityGraph, seeds: Seeds, passage_scores: np.ndarray | None,
                  passage_weight: float) -> tuple[np.ndarray, np.ndarray]:
    """The reset as ``(nodes, weights)`` (a node may repeat; its weights add up): entity seeds, the passages
    bridged entities title, plus ``passage_weight`` times the min-max normalised dense passage scores (omitted
    when the weight is 0)."""
    items = (*seeds.entities.items(), *seeds.passages.items())
    nodes = np.fromiter((node for node, _ in items), dtype=np.int64, count=len(items))
    weights = np.fromiter((weight for _, weight in items), dtype=np.float64, count=len(items))
    if passage_weight > 0 and passage_scores is not None and len(graph.passages):
        nodes = np.concatenate([nodes, np.arange(graph.n_entities, graph.n_nodes, dtype=np.int64)])
        weights = np.concatenate([weights, passage_weight * min_max(passage_scores)])
    return nodes, weights


def reset_vector(graph: EntityGraph, seeds: Seeds, passage_scores: np.ndarray | None,
                 passage_weight: float) -> np.ndarray:
    """The reset vector over all nodes (:func:`reset_entries`)."""
    reset = np.zeros(graph.n_nodes, dtype=np.float64)
    nodes, weights = reset_entries(graph, seeds, passage_scores, passage_weight)
    np.add.at(reset, nodes, weights)
    return reset
