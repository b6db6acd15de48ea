"""``sirerag inspect``: the HTML report, on a hand-made index (fast) and checked in headless Chromium."""
from __future__ import annotations

import json
import re

import pytest

from sirerag.cli.main import main
from sirerag.core.errors import InputError
from sirerag.report.render import decode_data, encode_data, fill, write_report

from benchmarks.browser import DevTools, find_chromium, run_headless
from _report_index import DOCS, ENTITIES, XSS, make_index

BROWSER = find_chromium()
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chromium installed (scripts/install.sh --dev "
                                                           "installs Debian's chromium)")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    index = make_index(root / "index")
    out = root / "report.html"
    assert main(["inspect", str(index), "--out", str(out), "--entity", "London", "--max-nodes", "6", "--quiet"]) == 0
    return index, out


def test_encoded_data_cannot_close_the_script_element():
    value = {"t": "</script><script>alert(1)</script><!-- \u2028 \u00e9", "n": [0, 1.5, None]}
    text = encode_data(value)
    assert re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", text)  # base64 only
    assert decode_data(text) == value and encode_data(value) == text  # round trip, same bytes every time


def test_fill_does_not_rescan_inserted_text():
    assert fill("{{A}}-{{B}}", {"A": "{{B}}", "B": "x"}) == "{{B}}-x"


def test_report_escapes_corpus_text_and_is_self_contained(report):
    _, out = report
    page = out.read_text(encoding="utf-8")
    assert XSS not in page and "<b>title</b>" not in page
    assert "&lt;b&gt;title&lt;/b&gt;" in page  # the title in the static tree, escaped
    assert len(re.findall(r"<script\b", page)) == 3  # data, cytoscape, page script
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing loaded from the network
    data = decode_data(re.search(r'<script type="application/octet-stream" id="report-data">(.*?)</script>', page,
                                 re.S).group(1))
    assert any(XSS in row[3] for row in data["entries"] if row[3])  # the full text survives in the data
    # an aggregate's text is its propositions joined: stored once, as the propositions
    aggregates = [row for row in data["entries"] if row[0] == 2]
    assert len(aggregates) == 2 and all(row[3] == 0 and row[7] for row in aggregates)
    assert data["entities"] == ["London"] and data["maxNodes"] == 6


def test_report_rejects_bad_options(report, tmp_path):
    index, _ = report
    with pytest.raises(InputError, match="--max-nodes must be an integer >= 2"):
        write_report(index, tmp_path / "r.html", max_nodes=1)
    no_graph = tmp_path / "nograph"
    make_index(no_graph)
    manifest = json.loads((no_graph / "manifest.json").read_text())
    manifest["components"] = {}
    (no_graph / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="--entity needs an entity graph"):
        write_report(no_graph, tmp_path / "r.html", entities=["London"])
    info = write_report(no_graph, tmp_path / "r.html")
    assert info.graph_edges == 0 and 'id="graph" hidden' in (tmp_path / "r.html").read_text()


@needs_browser
def test_page_in_chromium_escapes_and_draws(report):
    _, out = report
    dom = run_headless(BROWSER, out.as_uri(), "--dump-dom")
    assert 'data-ready="1"' in dom  # the page script ran to the end
    assert len(re.findall(r'<div class="tree" data-tree="similarity"><details class="node', dom)) == 1
    # --entity London is drawn on load: entity and passage nodes, at most --max-nodes
    kinds = re.findall(r'<li data-kind="(entity|passage)">', dom)
    assert kinds[0] == "entity" and "passage" in kinds and len(kinds) <= 6
    # JavaScript off: the overview and the trees are plain HTML (<details>), the script never ran
    with DevTools(BROWSER) as page:
        page.open(out.as_uri(), scripts=False)
        static = page.html()
    assert 'data-ready="1"' not in static and "Pool by tree, kind and level" in static
    assert static.count('<details class="node') == dom.count('<details class="node') == 11
    with DevTools(BROWSER) as page:
        page.open(out.as_uri())
        # the injected passage shows as text in the pool search, and no script of it ran
        page.eval("(() => { const q = document.getElementById('pool-q'); q.value = 'alert(1)';"
                  " q.dispatchEvent(new Event('input')); })()")
        page.wait_for("document.querySelectorAll('#pool-results li').length > 0")
        shown = page.eval("document.getElementById('pool-results').textContent")
        assert XSS in shown
        assert page.eval("document.querySelectorAll('script').length") == 3
        assert page.dialogs == []
        # an aggregate lists its propositions by document, each linked to the leaf it came from
        agg = "document.querySelector('.tree[data-tree=relatedness] details.k-aggregate')"
        page.eval(f"{agg}.open = true")
        page.wait_for(f"{agg}.querySelector('.props') !== null")
        assert page.eval(f"{agg}.querySelector(':scope > summary > b').textContent") == "Charles Babbage"
        # its text, stored only as its propositions, is joined again by the page
        assert page.eval(f"{agg}.querySelector(':scope > .full > .text').textContent") == " ".join(
            text for (_, text), ents in zip(DOCS, ENTITIES) if "Charles Babbage" in ents)
        assert page.eval(f"[...{agg}.querySelectorAll('.props h4')].map(h => h.textContent)") == [
            "Ada Lovelace", "Charles Babbage", "Injected <b>title</b>"]
        page.eval(f"{agg}.querySelector('.props a').click()")
        page.wait_for("document.getElementById('n0').open && location.hash === '#n0'")


def test_plot_and_compare_from_results(tmp_path, capsys):
    from PIL import Image

    from sirerag.report.plots import SIZE

    new = {"retriever": "dense", "index": "/x/full", "n_questions": 3, "passage_recall@2": 0.3,
           "passage_recall@5": 0.5, "answer_recall@256": 0.2, "answer_recall@512": 0.4,
           "passage_recall_curve": [round(0.1 * min(k, 9), 4) for k in range(1, 21)]}
    old = {"retriever": "bm25", "index": "/x/leaves", "n_questions": 3, "passage_recall@2": 0.2,
           "passage_recall@5": 0.45, "answer_recall@256": None, "answer_recall@512": 0.35}
    paths = []
    for name, result in (("new", new), ("old", old)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(result))
    assert main(["compare", *map(str, paths), "--plot", str(tmp_path / "c.png")]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"^\s+dense on full\s+bm25 on leaves$", printed, re.M)
    assert re.search(r"^answer_recall@256\s+0\.2000\s+n/a$", printed, re.M)
    assert Image.open(tmp_path / "c.png").size == SIZE
    (tmp_path / "bad.json").write_text("{}")
    assert main(["compare", str(tmp_path / "bad.json")]) == 1
    assert "not a 'sirerag eval --json' result" in capsys.readouterr().err
