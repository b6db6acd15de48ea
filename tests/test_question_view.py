"""``sirerag inspect INDEX --question Q``: one panel per question with PPR's linked seeds, bridged entities and
top passages with why each ranked (sirerag.retrievers.ppr_explain, sirerag.report.questions), on a small
offline build with a graph, checked as data, as HTML and in headless Chromium."""
from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from sirerag.cli.main import main
from sirerag.core.errors import InputError
from sirerag.pool.loaded import load_index
from sirerag.report.render import write_report
from sirerag.retrievers import load_retriever
from sirerag.retrievers.ppr_explain import explain

from benchmarks.browser import DevTools, find_chromium

DATA = Path(__file__).resolve().parents[1] / "data"
BROWSER = find_chromium()
TITLES = [json.loads(line)["title"] for line in (DATA / "corpus.jsonl").read_text().splitlines()[:40]]
#: a question naming the title of a passage of the corpus (so linking finds a seed), with markup to escape
QUESTION = f"Who founded <i>{TITLES[3]}</i>?"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("question")
    corpus = root / "c.jsonl"
    corpus.write_text("\n".join((DATA / "corpus.jsonl").read_text().splitlines()[:40]) + "\n", encoding="utf-8")
    out = root / "index"
    assert main(["build", str(corpus), "--out", str(out), "--chunking", "passage", "--graph", "--quiet"]) == 0
    return out


def test_explain_shows_seeds_and_passages_by_mass_consistent_with_the_search(index_dir):
    index = load_index(index_dir)
    titles = {d.id: d.title for d in index.documents()}
    with load_retriever("ppr", index, linking="ner") as retriever:
        view = explain(retriever, QUESTION, titles, k=8)
        hits = retriever.search(QUESTION, k=10)
    assert not view.fallback and view.retriever == "ppr"
    assert TITLES[3] in [s.entity for s in view.seeds]
    assert all(0 < s.reset_share <= 1 for s in view.seeds)
    assert sum(s.reset_share for s in view.seeds) + sum(p.reset_share for p in view.passages) <= 1 + 1e-6
    masses = [p.mass for p in view.passages]
    assert len(view.passages) == 8 and masses == sorted(masses, reverse=True) and masses[0] > 0
    top = view.passages[0]
    assert top.title == TITLES[3] and (TITLES[3], "title") in top.seeds
    # the search's first hit covers a passage whose search rank is 1
    first = index.pool.get(hits[0].entry_id).passages
    assert any(p.search_rank == 1 for p in view.passages if p.passage in first) or \
        not set(first) & {p.passage for p in view.passages}


def test_a_question_without_any_entity_falls_back_to_dense_and_says_so(index_dir):
    index = load_index(index_dir)
    with load_retriever("ppr", index, linking="ner") as retriever:
        view = explain(retriever, "what is it?", {}, k=3)
    assert view.fallback and not view.seeds and [p.search_rank for p in view.passages] == [1, 2, 3]


def test_inspect_writes_one_escaped_panel_per_question(index_dir, tmp_path):
    out = tmp_path / "r.html"
    assert main(["inspect", str(index_dir), "--out", str(out), "--question", QUESTION, "--question", "what is it?",
                 "--quiet"]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.count('<article class="question"') == 2 and '<a href="#questions">Questions</a>' in page
    assert f"<h3>{html.escape(QUESTION)}</h3>" in page and "<i>" + TITLES[3] not in page
    assert "Seed entities" in page and "Top passages by PageRank mass" in page
    assert "PageRank did not run" in page  # the second question's panel


@pytest.fixture(scope="module")
def no_graph(tmp_path_factory):
    """A passages-only index (no graph) holding the gold passages of the first two questions of data/."""
    root = tmp_path_factory.mktemp("nograph")
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines()[:2]]
    gold = {g for q in questions for g in q["gold_passage_ids"]}
    lines = (DATA / "corpus.jsonl").read_text().splitlines()
    rows = [line for line in lines if json.loads(line)["id"] in gold] + lines[:10]
    (root / "c.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    assert main(["build", str(root / "c.jsonl"), "--out", str(root / "index"), "--trees", "none",
                 "--chunking", "passage", "--quiet"]) == 0
    return root


def test_a_question_needs_a_text_and_ppr_needs_a_graph(index_dir, no_graph, tmp_path):
    with pytest.raises(InputError, match="--question must be a non-empty text"):
        write_report(index_dir, tmp_path / "r.html", questions=["  "])
    with pytest.raises(InputError, match="--retriever ppr needs an entity graph"):
        write_report(no_graph / "index", tmp_path / "r.html", questions=["Who?"], retriever="ppr")
    with pytest.raises(InputError, match="--limit must be an integer >= 1 and goes with --questions"):
        write_report(no_graph / "index", tmp_path / "r.html", questions=["Who?"], limit=3)
    assert not (tmp_path / "r.html").exists()


def test_without_a_graph_a_question_shows_the_dense_search(no_graph, tmp_path):
    out = tmp_path / "r.html"
    write_report(no_graph / "index", out, questions=["Who founded <i>Huguenots</i>?"], show_progress=False)
    page = out.read_text(encoding="utf-8")
    assert page.count('<article class="question"') == 1 and "Retriever <b>dense</b>" in page
    assert "Top entries" in page and "Seed entities" not in page and "<i>Huguenots" not in page
    assert "Gold passages" not in page  # a --question has no gold passages


def test_bm25_panels_name_the_matched_terms_and_the_gold_ranks(no_graph, tmp_path):
    from sirerag.report.questions import question_views
    from sirerag.report.search_view import query_terms

    index = load_index(no_graph / "index")
    rows = [json.loads(line) for line in (no_graph / "q.jsonl").read_text().splitlines()]
    views = question_views(index, [r["question"] for r in rows], retriever="bm25", k=5,
                           golds=[r["gold_passage_ids"] for r in rows])
    assert len(views) == 2
    for (view, gold), row in zip(views, rows):
        assert view.retriever == "bm25" and gold == view.gold and 1 <= len(view.entries) <= 5  # BM25: score > 0
        assert [g.passage for g in gold] == row["gold_passage_ids"]
        scores = [e.score for e in view.entries]
        assert scores == sorted(scores, reverse=True) and scores[0] > 0
        assert view.terms == query_terms(row["question"]) and "the" not in view.terms
        for entry in view.entries:  # the terms an entry holds are terms of the question found in its text
            text = index.pool.get(entry.entry_id).text.lower()
            assert set(entry.matched) <= set(view.terms) and all(t in text for t in entry.matched)
        assert view.entries[0].matched  # BM25's first hit shares a term with the question
        for g in gold:  # a rank names the first entry that covers the gold passage
            if g.entry_rank is not None and g.entry_rank <= 5:
                assert g.passage in view.entries[g.entry_rank - 1].passages
                assert all(g.passage not in e.passages for e in view.entries[:g.entry_rank - 1])
    clara = views[0][1][0]
    assert clara.title == "Clara Peeters" and clara.entry_rank == 1 and clara.passage_rank == 1
    assert {"clara", "peeters"} <= set(views[0][0].entries[0].matched)
    out = tmp_path / "r.html"
    assert main(["inspect", str(no_graph / "index"), "--out", str(out), "--questions", str(no_graph / "q.jsonl"),
                 "--limit", "1", "--retriever", "bm25", "--quiet"]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.count('<article class="question"') == 1 and page.count("Gold passages") == 1
    assert "Retriever <b>bm25</b>" in page and "Clara Peeters" in page


@pytest.mark.skipif(BROWSER is None, reason="no Chromium installed (scripts/install.sh --dev installs Debian's "
                                            "chromium)")
def test_the_question_panel_in_chromium(index_dir, tmp_path):
    out = tmp_path / "r.html"
    write_report(index_dir, out, questions=[QUESTION], show_progress=False)
    with DevTools(BROWSER) as page:
        page.open(out.as_uri())
        page.wait_for("document.body.dataset.ready === '1'")
        assert page.eval("document.querySelector('#questions h3').textContent") == QUESTION
        assert page.eval("document.querySelector('#questions h3 i') === null")  # the markup is text
        rows = page.eval("[...document.querySelectorAll('#questions table.passages tbody tr')].length")
        assert rows == 10
        why = page.eval("document.querySelector('#questions table.passages tbody tr td:last-child').textContent")
        assert f"title is seed {TITLES[3]}" in why
        assert page.eval("getComputedStyle(document.getElementById('questions')).display") != "none"
        assert page.dialogs == []


def test_bridging_is_on_by_default_where_the_index_stores_proposition_vectors(index_dir, tmp_path):
    index = load_index(index_dir)
    assert index.manifest.component("proposition_vectors") is not None
    titles = {d.id: d.title for d in index.documents()}
    with load_retriever("ppr", index) as retriever:
        ppr = retriever.base
        assert ppr.bridge is not None and ppr.bridge_settings.hops == 2 and ppr.bridge_settings.max_seeds == 1
        view = explain(retriever, QUESTION, titles, k=5)
    # one seed: the propositions naming it that best match the question bridge to the entities they name
    assert len(view.seeds) == 1 and view.bridges
    assert all(b.hop in (1, 2) and b.proposition and -1 <= b.score <= 1 for b in view.bridges)
    assert view.bridges[0].via == TITLES[3] and view.bridges[0].hop == 1
    with load_retriever("ppr", index, bridge_hops=0) as retriever:
        assert retriever.base.bridge is None
    # the graph's title edges (title_weight from graph.json): a title node bridges through its passage's facts
    with load_retriever("ppr", index) as retriever:
        ppr = retriever.base
        titled = ppr.graph.titled(2.0)
        assert {titles[p] for _, p in titled} == set(titles.values()) - {""}  # every titled passage
        assert ppr.bridge.title_facts is not None
        reached = [(f, ppr.bridge.title_nodes(f)) for f in range(len(ppr.bridge.facts)) if ppr.bridge.title_nodes(f)]
        assert reached and all((node, ppr.bridge.facts[f].passage) in titled for f, nodes in reached for node in nodes)
        assert all(node not in ppr.bridge.facts[f].entities for f, nodes in reached for node in nodes)
    with load_retriever("ppr", index, bridge_titles=False) as retriever:
        # the title edges are read all the same: bridging skips them per search, a bridged title keeps its passage
        assert retriever.base.bridge_settings.titles is False and retriever.base.bridge.titled
    out = tmp_path / "r.html"
    write_report(index_dir, out, questions=[QUESTION], show_progress=False)
    assert 'class="bridges"' in out.read_text(encoding="utf-8")


def test_the_passage_a_bridged_entity_titles_gets_a_reset_share_the_panel_names(index_dir):
    from sirerag.report.questions import _why

    index = load_index(index_dir)
    titles = {d.id: d.title for d in index.documents()}
    question = f"Who founded <i>{TITLES[37]}</i>?"

    def titled_by_a_bridge(**options):
        with load_retriever("ppr", index, **options) as retriever:
            view = explain(retriever, question, titles, k=5)
        return {p.passage: p for p in view.passages if any(edge == "title" for _, edge in p.bridges)}

    with_weight, without = titled_by_a_bridge(), titled_by_a_bridge(bridge_title_passages=0.0)
    shared = set(with_weight) & set(without)
    assert shared and all(with_weight[p].reset_share > without[p].reset_share for p in shared)
    assert all("passage seed (dense + BM25) and its bridged title" in _why(with_weight[p]) for p in shared)
    # the share the panel names is the bridged weight itself, read from the seeds, not guessed from the edges
    assert all(0 < with_weight[p].title_share <= with_weight[p].reset_share for p in shared)
    assert all(without[p].title_share == 0 for p in shared)
