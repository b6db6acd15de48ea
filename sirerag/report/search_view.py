"""Question panels for a search without a graph (``sirerag inspect INDEX --question Q --retriever dense``).

What a dense, BM25, ColBERT or fused search ranked first for a question, and why a gold passage was
missed: the top entries with their scores, titles and the question's terms each entry's text holds (the
terms BM25 matched: the same lower-cased alphanumeric tokens without English stopwords), and, for a
question read from a questions file, the rank of every gold passage (the first entry that covers it, and
its place among the passages in the order they first appear, as ``sirerag eval`` counts them).
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from sirerag.evaluation.retrieval import passage_ranking
from sirerag.pool.bm25 import english_stopwords, tokenize
from sirerag.pool.titles import entry_title

if TYPE_CHECKING:
    from sirerag.core.types import Pool
    from sirerag.pool.loaded import LoadedIndex
    from sirerag.retrievers.base import Hit, Retriever

_E = html.escape

#: entries searched to find the gold passages' ranks (deeper than the entries shown)
GOLD_DEPTH = 100
_PREVIEW = 240


@dataclass(frozen=True)
class EntryView:
    """One ranked entry of a search view."""

    rank: int
    entry_id: str
    score: float
    kind: str
    tree: str
    level: int
    title: str
    passages: tuple[str, ...]
    matched: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class GoldRank:
    """Where a gold passage came: ``entry_rank`` of the first entry covering it and ``passage_rank`` among the
    passages (both None when it is not in the top :data:`GOLD_DEPTH` entries)."""

    passage: str
    title: str
    entry_rank: int | None
    passage_rank: int | None


@dataclass(frozen=True)
class SearchView:
    """A question, the retriever, the question's terms, the top entries and (from a questions file) the gold
    passages' ranks (None for a question without gold passages)."""

    question: str
    retriever: str
    terms: tuple[str, ...]
    entries: tuple[EntryView, ...]
    gold: tuple[GoldRank, ...] | None = None


def query_terms(text: str) -> tuple[str, ...]:
    """The question's terms as BM25 sees them, in order, without repeats."""
    return tuple(dict.fromkeys(tokenize(text, english_stopwords())))


def gold_ranks(hits: Sequence[Hit], pool: Pool, gold: Sequence[str], titles: dict[str, str]) -> tuple[GoldRank, ...]:
    """The rank of each gold passage in ``hits`` (entries, best first)."""
    first_entry: dict[str, int] = {}
    for rank, hit in enumerate(hits, 1):
        for passage in pool.get(hit.entry_id).passages:
            first_entry.setdefault(passage, rank)
    passage_rank = {p: i for i, p in enumerate(passage_ranking(hits, pool), 1)}
    return tuple(GoldRank(g, titles.get(g, ""), first_entry.get(g), passage_rank.get(g)) for g in gold)


def search_views(index: LoadedIndex, retriever: Retriever, name: str, questions: Sequence[str],
                 golds: Sequence[Sequence[str] | None], *, k: int = 10) -> list[SearchView]:
    """Explain each question with ``retriever`` (already loaded over ``index`` as ``name``)."""
    documents = {d.id: d for d in index.documents()}
    titles = {i: d.title for i, d in documents.items()}
    pool = index.pool
    out = []
    for question, gold in zip(questions, golds):
        hits = retriever.search(question, k=max(k, GOLD_DEPTH) if gold else k)
        terms = query_terms(question)
        entries = []
        for rank, hit in enumerate(hits[:k], 1):
            entry = pool.get(hit.entry_id)
            words = set(tokenize(entry.text))
            entries.append(EntryView(rank, entry.id, float(hit.score), entry.kind, entry.tree, entry.level,
                                     entry_title(pool, entry, documents), tuple(entry.passages),
                                     tuple(t for t in terms if t in words), entry.text[:_PREVIEW]))
        out.append(SearchView(question, name, terms, tuple(entries),
                              gold_ranks(hits, pool, gold, titles) if gold else None))
    return out


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], cls: str) -> str:
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _entry(e: EntryView) -> str:
    what = e.kind if e.kind == "leaf" else f"{e.tree} {e.kind}, level {e.level}"
    shown = ", ".join(e.passages[:3]) + (f" and {len(e.passages) - 3} more" if len(e.passages) > 3 else "")
    more = "…" if len(e.text) >= _PREVIEW else ""
    return (f"<b>{_E(e.title or '(untitled)')}</b> <span class=\"hint\">{_E(what)}; passage(s) "
            f"<code>{_E(shown)}</code></span><br>{_E(e.text)}{more}")


def gold_table(gold: Sequence[GoldRank], depth: int = GOLD_DEPTH) -> str:
    """The gold passages' ranks as HTML."""
    missing = f"not in the top {depth} entries"
    return _table(["gold passage", "first entry covering it", "passage rank"],
                  [[f"{_E(g.title or g.passage)} <code>{_E(g.passage)}</code>",
                    str(g.entry_rank) if g.entry_rank else missing,
                    str(g.passage_rank) if g.passage_rank else "–"] for g in gold], "gold")


def search_panel(view: SearchView, number: int) -> str:
    """One question's panel as HTML."""
    out = [f'<article class="question" id="question-{number}"><h3>{_E(view.question)}</h3>',
           f"<p class=\"hint\">Retriever <b>{_E(view.retriever)}</b>. Question terms (as BM25 reads them): "
           f"{_E(', '.join(view.terms)) or '(none)'}.</p>"]
    if view.gold is not None:
        out.append("<h4>Gold passages</h4>" + gold_table(view.gold))
    out.append("<h4>Top entries</h4>")
    out.append(_table(["#", "entry", "score", "question terms in its text"],
                      [[str(e.rank), _entry(e), f"{e.score:.4f}", _E(", ".join(e.matched)) or "–"]
                       for e in view.entries], "entries"))
    out.append("</article>")
    return "".join(out)
