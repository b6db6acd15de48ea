"""The question panels of the inspection report (``sirerag inspect INDEX --question "Q"``).

One panel per question, rendered as static HTML (it needs no JavaScript): the seed entities PPR linked
with their reset shares, the entities bridging reached and the propositions that bridged them, and the
top passages by PageRank mass with why each ranked (:mod:`sirerag.retrievers.ppr_explain`). Every text
from the corpus or the question is escaped.
"""
from __future__ import annotations

import html
from typing import Any, Sequence

from sirerag.core.errors import InputError
from sirerag.retrievers.ppr_explain import PassageView, QuestionView, explain_many

_E = html.escape


def question_views(index: Any, questions: Sequence[str], *, k: int = 10) -> list[QuestionView]:
    """Explain each question with the index's PPR retriever (``linking="ner"``, its stored settings)."""
    bad = [q for q in questions if not isinstance(q, str) or not q.strip()]
    if bad:
        raise InputError(f"--question must be a non-empty text, got {bad[0]!r}")
    if index.component("graph") is None:
        raise InputError(f"{index.path}: --question needs an entity graph; rebuild the index with --graph")
    from sirerag.retrievers import load_retriever

    titles = {d.id: d.title for d in index.documents()}
    with load_retriever("ppr", index, linking="ner") as retriever:
        return explain_many(retriever, list(questions), titles, k=k)


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


def panel(view: QuestionView, number: int) -> str:
    """One question's panel as HTML."""
    out = [f'<article class="question" id="question-{number}"><h3>{_E(view.question)}</h3>']
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


def questions_html(views: Sequence[QuestionView]) -> str:
    """The report's question section (empty without questions)."""
    if not views:
        return ""
    panels = "".join(panel(v, i) for i, v in enumerate(views, 1))
    return ('<section id="questions"><h2>Questions</h2><p class="hint">How the PPR retriever answered each '
            "question: the seeds it linked, the entities it bridged to, and the passages its PageRank ranked "
            f"highest, with why.</p>{panels}</section>")
