"""Why the PPR retriever ranked what it ranked, for one question (``sirerag inspect --question``).

:func:`explain` runs the retriever's own linking and PageRank for a question and returns what a person
needs to see why a second hop was found or missed: the linked seed entities with their share of the
reset vector, the entities reached by bridging with the propositions that bridged them, and the top
passages by PageRank mass, each with the seeds and bridges it contains and its own passage-seed score.
:func:`question_seeds` gives the linking alone (the seeds and bridges of many questions, no PageRank), for a
study of what the walk reached. Nothing here changes a ranking: the passages' search ranks come from the same
retriever's ``search``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np

from sirerag.graph.linking import Seeds, reset_vector
from sirerag.retrievers.base import Retriever, check_query

if TYPE_CHECKING:
    from sirerag.retrievers.ppr import PPRRetriever


@dataclass(frozen=True)
class SeedView:
    """A linked seed entity: the query text it came from, the entity node's name, how it was linked
    (``surface`` match or ``embedding`` of a tagged entity, with the cosine) and its reset share."""

    query_text: str
    entity: str
    how: str
    cosine: float
    reset_share: float


@dataclass(frozen=True)
class BridgeView:
    """An entity reached from a seed (or an earlier bridge) through a proposition that names both and
    matches the question: the hop, the entity it came from, the proposition, its cosine with the
    question, and the reset share the bridged entity got."""

    entity: str
    hop: int
    via: str
    proposition: str
    score: float
    reset_share: float


@dataclass(frozen=True)
class PassageView:
    """A passage by PageRank mass: its rank by mass, its rank in the search results (0 when it is not
    among them), the mass, its reset share (its passage-seed score plus ``title_share``, the weight a bridged
    entity that titles it, or a synonym of its title, gave it) and the seed or bridged entities it contains
    (``title`` when the entity is the passage's title)."""

    rank: int
    passage: str
    title: str
    mass: float
    search_rank: int
    reset_share: float
    seeds: tuple[tuple[str, str], ...]
    bridges: tuple[tuple[str, str], ...]
    title_share: float = 0.0


@dataclass
class QuestionView:
    """Everything the question panel shows; ``fallback`` is True when linking found no seed and the
    retriever answered by dense retrieval."""

    question: str
    retriever: str
    fallback: bool = False
    seeds: list[SeedView] = field(default_factory=list)
    bridges: list[BridgeView] = field(default_factory=list)
    passages: list[PassageView] = field(default_factory=list)


def ppr_of(retriever: Retriever) -> PPRRetriever:
    """The PPR retriever inside ``retriever`` (a pool-rule wrapper keeps it as ``base``).

    Raises:
        TypeError: ``retriever`` is not a PPR retriever, bare or wrapped.
    """
    inner: object = retriever
    while not hasattr(inner, "pagerank") and hasattr(inner, "base"):
        inner = inner.base
    if not hasattr(inner, "pagerank"):
        raise TypeError(f"explain needs a PPR retriever, got {type(retriever).__name__}")
    return cast("PPRRetriever", inner)


def explain(retriever: Retriever, question: str, titles: dict[str, str], *, k: int = 10) -> QuestionView:
    """Explain the ranking of ``question`` by a PPR retriever (bare or wrapped by the pool rule).

    Args:
        retriever: what :func:`~sirerag.retrievers.load_retriever` returned for ``ppr``.
        question: the question.
        titles: passage (document) id -> title, for display and for telling title edges apart.
        k: passages shown (and search results compared).
    """
    check_query([question])
    ppr = ppr_of(retriever)
    graph, view = ppr.graph, QuestionView(question=question, retriever=ppr.name)
    mass, (seeds,), dense = ppr.node_scores([question])
    hits = retriever.search(question, k=max(k, 10))
    search_rank: dict[str, int] = {}
    for rank, hit in enumerate(hits, 1):
        for passage in ppr.pool.entries[ppr.pool.position(hit.entry_id)].passages:
            search_rank.setdefault(passage, rank)
    if mass is None:
        view.fallback = True
        for rank, hit in enumerate(hits[:k], 1):
            for passage in ppr.pool.entries[ppr.pool.position(hit.entry_id)].passages[:1]:
                view.passages.append(PassageView(rank, passage, titles.get(passage, ""), 0.0, rank, 0.0, (), ()))
        return view
    reset = reset_vector(graph, seeds, ppr.seed_scores(question, dense[0]), ppr.passage_weight)
    total = float(reset.sum()) or 1.0
    bridged = {b.node for b in seeds.bridges}
    for text, node, cosine in seeds.query_entities:
        how = "surface" if cosine == 1.0 else "embedding"  # surface matches are recorded with cosine 1
        view.seeds.append(SeedView(text, graph.entities[node], how, round(cosine, 3),
                                   round(float(reset[node]) / total, 4)))
    for b in seeds.bridges:
        view.bridges.append(BridgeView(graph.entities[b.node], b.hop, graph.entities[b.via], b.text,
                                       round(b.score, 3), round(float(reset[b.node]) / total, 4)))
    column = np.asarray(mass)[:, 0]
    offset = graph.n_entities
    order = np.argsort(-column[offset:], kind="stable")[:k]
    seed_nodes = {node for _, node, _ in seeds.query_entities}
    adjacency = graph.adjacency
    for rank, position in enumerate(order, 1):
        node = offset + int(position)
        passage = graph.passages[int(position)]
        title = titles.get(passage, "")
        neighbours = adjacency.indices[adjacency.indptr[node]:adjacency.indptr[node + 1]]
        found: dict[str, list[Any]] = {"seed": [], "bridge": []}
        for n in neighbours:
            kind = "seed" if n in seed_nodes else "bridge" if n in bridged else None
            if kind:
                edge = "title" if graph.entities[n].casefold() == title.casefold() else "contains"
                found[kind].append((graph.entities[n], edge))
        view.passages.append(PassageView(rank, passage, title, float(column[node]), search_rank.get(passage, 0),
                                         round(float(reset[node]) / total, 4), tuple(sorted(found["seed"])),
                                         tuple(sorted(found["bridge"])),
                                         round(seeds.passages.get(node, 0.0) / total, 4)))
    return view


def question_seeds(retriever: Retriever, questions: Sequence[str], *, batch: int = 64) -> list[Seeds]:
    """How a PPR retriever (bare or wrapped by the pool rule) links each question, as its search does: the
    linked entities (``query_entities``), the bridged ones (``bridges``) and the reset weights, without PageRank.
    ``batch``: questions linked per call."""
    check_query(list(questions), batch=True)
    ppr = ppr_of(retriever)
    out: list[Seeds] = []
    for start in range(0, len(questions), batch):
        part = list(questions[start:start + batch])
        out += ppr.link(part, ppr.embedder.encode_queries(part))
    return out


def explain_many(retriever: Retriever, questions: Sequence[str], titles: dict[str, str], *, k: int = 10
                 ) -> list[QuestionView]:
    """:func:`explain` for each question."""
    return [explain(retriever, q, titles, k=k) for q in questions]
