"""``sirerag inspect`` and the eval plots on data/'s index (both trees, --graph; real MiniLM), in headless Chromium."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from sirerag.cli.main import main
from sirerag.report.render import decode_data

from benchmarks.browser import DevTools, find_chromium, run_headless
from _report_index import XSS

DATA = Path(__file__).resolve().parents[1] / "data"
BROWSER = find_chromium()
pytestmark = pytest.mark.slow
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chromium installed (scripts/install.sh --dev "
                                                           "installs Debian's chromium)")
INJECTED = {"id": "pxss", "title": "Injected passage", "text": f"Clara Peeters painted here. {XSS} The end."}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("report_data")
    corpus = root / "corpus.jsonl"
    corpus.write_text((DATA / "corpus.jsonl").read_text(encoding="utf-8") + json.dumps(INJECTED) + "\n",
                      encoding="utf-8")
    index = root / "index"
    assert main(["build", str(corpus), "--out", str(index), "--chunking", "passage", "--graph", "--quiet"]) == 0
    nodes = [json.loads(line) for line in (index / "graph" / "nodes.jsonl").read_text().splitlines()]
    entity = max((n for n in nodes if n["kind"] == "entity"), key=lambda n: n["passages"])["name"]
    out = root / "report.html"
    assert main(["inspect", str(index), "--out", str(out), "--max-nodes", "40", "--quiet"]) == 0
    return index, out, entity


def _roots(index: Path) -> dict[str, int]:
    entries = [json.loads(line) for line in (index / "entries.jsonl").read_text().splitlines()]
    counts = {}
    for tree in ("similarity", "relatedness"):
        members = {e["id"] for e in entries if e["tree"] == tree}
        children = {c for e in entries if e["tree"] == tree for c in e["children"] if c in members}
        counts[tree] = len(members - children)
    return counts


def test_report_size_and_content(built):
    index, out, _ = built
    page = out.read_text(encoding="utf-8")
    assert XSS not in page
    assert out.stat().st_size < 5_000_000  # 300 passages; the 30k-entry budget is 30 MB


@needs_browser
def test_trees_roots_and_expanding(built):
    index, out, _ = built
    roots = _roots(index)
    assert roots["similarity"] >= 1 and roots["relatedness"] >= 1
    dom = run_headless(BROWSER, out.as_uri(), "--dump-dom")
    assert 'data-ready="1"' in dom
    for tree, n in roots.items():
        section = dom.split(f'<section id="tree-{tree}">', 1)[1].split("</section>", 1)[0]
        depth, top = 0, 0  # top-level <details> of the tree, counted by nesting depth
        for closing in re.findall(r"<(/?)details\b", section):
            top += not closing and depth == 0
            depth += -1 if closing else 1
        assert top == n, tree
    with DevTools(BROWSER) as page:
        page.open(out.as_uri())
        first = "document.querySelector('.tree[data-tree=similarity] > details.node')"
        kid = f"{first}.querySelector(':scope > .kids > details.node')"
        assert page.eval(f"{kid}.checkVisibility()") is False
        page.eval(f"{first}.querySelector('summary').click()")
        page.wait_for(f"{kid}.checkVisibility() && {first}.querySelector('.full').textContent.length > 20")
        assert page.eval(f"{first}.querySelectorAll(':scope > .kids > details.node').length") >= 2


@needs_browser
def test_entity_search_draws_a_neighbourhood_and_corpus_text_stays_text(built):
    index, out, entity = built
    with DevTools(BROWSER) as page:
        page.open(out.as_uri())
        page.eval(f"(() => {{ const q = document.getElementById('entity-q'); q.value = {json.dumps(entity)};"
                  " q.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'})); })()")
        page.wait_for("document.querySelectorAll('#graph-list li[data-kind=passage]').length > 0")
        assert 2 <= page.eval("+document.getElementById('cy').dataset.nodes") <= 40
        assert page.eval("document.querySelector('#graph-list li').textContent") == f"entity: {entity}"
        # the injected passage's leaf, opened from a link: its text is shown, its script never runs
        data = decode_data(re.search(r'id="report-data">(.*?)</script>', out.read_text(encoding="utf-8"),
                                     re.S).group(1))
        leaf = next(i for i, e in enumerate(data["entries"]) if e[0] == 0 and "alert(1)" in e[3])
        page.eval(f"location.hash = '#n{leaf}'")
        page.wait_for(f"document.getElementById('n{leaf}').open && "
                      f"document.querySelector('#n{leaf} .full').textContent.length > 0")
        assert XSS in page.eval(f"document.querySelector('#n{leaf} .full').textContent")
        assert page.eval(f"document.querySelectorAll('#n{leaf} script').length") == 0
        assert page.eval("document.querySelectorAll('script').length") == 3
        assert page.dialogs == []


@needs_browser
def test_screenshot_of_the_first_screen_is_not_blank(built, tmp_path):
    from PIL import Image

    _, out, _ = built
    png = tmp_path / "shot.png"
    run_headless(BROWSER, out.as_uri(), f"--screenshot={png}", "--window-size=1280,900")
    pixels = np.asarray(Image.open(png).convert("RGB"))
    assert pixels.shape == (900, 1280, 3)
    assert pixels.std() > 20 and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50


def test_eval_plot_and_compare(built, tmp_path, capsys):
    from PIL import Image

    from sirerag.report.plots import SIZE

    index, _, _ = built
    runs = []
    for retriever in ("dense", "bm25"):
        runs.append(tmp_path / f"{retriever}.json")
        png = tmp_path / f"{retriever}.png"
        assert main(["eval", str(index), "--questions", str(DATA / "questions.jsonl"), "--retriever", retriever,
                     "--limit", "10", "--json", str(runs[-1]), "--plot", str(png), "--quiet"]) == 0
        assert Image.open(png).size == SIZE
        result = json.loads(runs[-1].read_text())
        curve = result["passage_recall_curve"]
        assert len(curve) == 20 and curve == sorted(curve)
        assert curve[4] == pytest.approx(result["passage_recall@5"], abs=1e-4)
        assert curve[19] == pytest.approx(result["passage_recall@20"], abs=1e-4)
    capsys.readouterr()
    assert main(["compare", *map(str, runs), "--plot", str(tmp_path / "cmp.png"), "--labels", "dense,bm25"]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"^\s+dense\s+bm25$", printed, re.M)
    assert re.search(r"^passage_recall@5\s+\d\.\d{4}\s+\d\.\d{4}$", printed, re.M)
    assert Image.open(tmp_path / "cmp.png").size == SIZE
