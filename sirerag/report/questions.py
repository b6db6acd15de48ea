"""The question panels of the inspection report (``sirerag inspect INDEX --question "Q"``).

One panel per question, rendered as static HTML (it needs no JavaScript). With the PPR retriever (the
default on an index with an entity graph): the seed entities PPR linked with their reset shares, the
entities bridging reached and the propositions that bridged them, and the top passages by PageRank mass
with why each ranked (:mod:`sirerag.retrievers.ppr_explain`). With any other retriever (the default on an
index without a graph): the top entries with their scores and matched terms
(:mod:`sirerag.report.search_view`). Questions read from a questions file also show their gold passages'
ranks. Every text from the corpus or the question is escaped.
"""
from __future__ import annotations

import html
from typing import TYPE_CHECKING, Sequence

from sirerag.core.errors import InputError
from sirerag.report.search_view import (GOLD_DEPTH, GoldRank, SearchView, gold_ranks, gold_table, search_panel,
                                        search_views)
from sirerag.retrievers.ppr_explain import PassageView, QuestionView, explain_many

if TYPE_CHECKING:
    from sirerag.pool.loaded import LoadedIndex

_E = html.escape
#: one explained question: its view (PPR's or another retriever's) and its gold passages' ranks (None: no gold)
Explained = tuple[QuestionView | SearchView, tuple[GoldRank, ...] | None]


def question_views(index: LoadedIndex, questions: Sequence[str], *, k: int = 10, retriever: str | None = None,
                   golds: Sequence[Sequence[str] | None] | None = None) -> list[Explained]:
    """Explain each question: ``(view, gold)`` pairs, a :class:`QuestionView` with PPR (``linking="ner"``,
    its stored settings) or a :class:`~sirerag.report.search_view.SearchView` with another retriever, and the
    gold passages' ranks (None for a question without gold passages).

    Args:
        retriever: ``ppr``, ``dense``, ``bm25``, ``colbert`` or a fusion; None: the index's default retriever.
        golds: gold passage ids per question (from a questions file), or None.
    """
    from sirerag.retrievers import default_retriever, load_retriever

    bad = [q for q in questions if not isinstance(q, str) or not q.strip()]
    if bad:
        raise InputError(f"--question must be a non-empty text, got {bad[0]!r}")
    golds = list(golds) if golds is not None else [None] * len(questions)
    name = retriever or default_retriever(index)[0]
    if name == "ppr":
        if index.component("graph") is None:
            raise InputError(f"{index.path}: --retriever ppr needs an entity graph; rebuild the index with --graph, "
                             "or explain the question with --retriever dense or bm25")
        titles = {d.id: d.title for d in index.documents()}
        with load_retriever("ppr", index) as loaded:  # its default linking, ner, which the explanation shows
            views = explain_many(loaded, list(questions), titles, k=k)
            ranks = [gold_ranks(loaded.search(q, k=GOLD_DEPTH), index.pool, g, titles) if g else None
                     for q, g in zip(questions, golds)]
        return list(zip(views, ranks))
    loaded = load_retriever(name, index)
    try:
        return [(view, view.gold) for view in search_views(index, loaded, name, questions, golds, k=k)]
    finally:
        close = getattr(loaded, "close", None)
        if callable(close):
            close()


def _share(value: float) -> str:
    return f"{100 * value:.1f}%"


def _why(p: PassageView) -> str:
    parts = [f"{'title is' if edge == 'title' else 'names'} seed <b>{_E(name)}</b>" for name, edge in p.seeds]
    parts += [f"{'title is' if edge == 'title' else 'names'} bridged <b>{_E(name)}</b>" for name, edge in p.bridges]
    if p.reset_share > 0:
        source = "passage seed (dense + BM25)" + (" and its bridged title" if p.title_share > 0 else "")
        parts.append(f"{source} {_share(p.reset_share)} of the reset")
    return "; ".join(parts) or "reached through the graph only"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], cls: str) -> str:
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def panel(view: QuestionView, number: int, gold: tuple[GoldRank, ...] | None = None) -> str:
    """One question's panel as HTML."""
    out = [f'<article class="question" id="question-{number}"><h3>{_E(view.question)}</h3>']
    if gold is not None:
        out.append("<h4>Gold passages</h4>" + gold_table(gold))
    if view.fallback:
        out.append('<p class="note">Linking found no entity of the graph in this question, so PageRank did not '
                   "run: the retriever answered by dense retrieval over the pool (the passages below).</p>")
    else:
        out.append("<h4>Seed entities</h4>")
        out.append(_table(["from the question", "entity node", "linked by", "reset share"],
                          [[_E(s.query_text), _E(s.entity),
                            "surface form" if s.how == "surface" else f"embedding (cosine {s.cosine:.2f})",
                            _share(s.reset_share)] for s in view.seeds], "seeds"))
        out.append("<h4>Bridged entities</h4>")
        if view.bridges:
            out.append(_table(["hop", "entity", "from", "proposition that bridged it", "cosine", "reset share"],
                              [[str(b.hop), _E(b.entity), _E(b.via), _E(b.proposition), f"{b.score:.2f}",
                                _share(b.reset_share)] for b in view.bridges], "bridges"))
        else:
            out.append('<p class="hint">No entity was bridged: bridging is off for this retriever, or no '
                       "proposition naming a seed matched the question well enough.</p>")
    out.append("<h4>Top passages by PageRank mass</h4>" if not view.fallback else "<h4>Top passages</h4>")
    out.append(_table(["#", "passage", "mass", "search rank", "why"],
                      [[str(p.rank), f"{_E(p.title or p.passage)} <code>{_E(p.passage)}</code>",
                        f"{p.mass:.4f}", str(p.search_rank) if p.search_rank else "–", _why(p)]
                       for p in view.passages], "passages"))
    out.append("</article>")
    return "".join(out)


def questions_html(views: Sequence[Explained]) -> str:
    """The report's question section (empty without questions), from :func:`question_views`."""
    if not views:
        return ""
    panels = "".join(search_panel(v, i) if isinstance(v, SearchView) else panel(v, i, gold)
                     for i, (v, gold) in enumerate(views, 1))
    if isinstance(views[0][0], SearchView):
        hint = ("What the search ranked first for each question: the top entries with their scores and the "
                "question's terms each one holds.")
    else:
        hint = ("How the PPR retriever answered each question: the seeds it linked, the entities it bridged to, "
                "and the passages its PageRank ranked highest, with why.")
    return f'<section id="questions"><h2>Questions</h2><p class="hint">{hint}</p>{panels}</section>'

