"""Size, write time and browser render time of ``sirerag inspect`` reports.

    python -m benchmarks.bench_inspect INDEX [INDEX ...] --out /tmp/reports
    B=../shared/bench
    python -m benchmarks.bench_inspect --synthetic $B/2wikimultihopqa/corpus.jsonl $B/hotpotqa/corpus.jsonl \
        $B/musique/corpus.jsonl --entries 30000 --out /tmp/reports --sections --browser

``--synthetic CORPUS ...`` makes a pool of realistic size without any model: the corpus passages
(several corpora are concatenated, duplicates dropped; ``--entries N`` takes as many passages as
give about N pool entries) as leaves, three levels of summaries over groups of six, one aggregate
per capitalised name that occurs in two or more sentences (its sentences as propositions),
summaries over those, and the entity graph of the sentences (no synonym edges).

Prints one JSON line per index as it goes, and the harness report with all of them (``results.indexes``):
entries, tree nodes, graph edges, MB, write wall/CPU seconds, peak RSS, the bytes of each part of the page
(``--sections``) and, with ``--browser``, the seconds headless Chromium takes from navigation until the page
script has finished.
"""
from __future__ import annotations

import argparse
import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import Report, Timer, add_json_argument, peak_rss_mib
from sirerag.graph.build import build_graph
from sirerag.graph.store import GRAPH_DIR, save_graph
from sirerag.core.io import read_jsonl, write_manifest
from sirerag.pool.store import CHUNKS, DOCUMENTS, PROPOSITIONS, save_pool, save_records
from sirerag.report.render import decode_data, write_report
from sirerag.core.types import Chunk, Document, Node, Pool, Proposition, Tree

NAME = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _summaries(children: list[Node], tree: Tree, levels: int) -> list[Node]:
    out: list[Node] = []
    for level in range(1, levels + 1):
        parents = []
        for g in range(0, len(children), 6):
            group = children[g:g + 6]
            text = " ".join(SENTENCE.split(c.text)[0] for c in group)[:1200]
            parents.append(Node(id=f"s{tree[0]}{level}-{g}", text=text, kind="summary", tree=tree, level=level,
                                children=tuple(c.id for c in group),
                                passages=tuple(dict.fromkeys(p for c in group for p in c.passages))))
        out += parents
        children = parents
    return out


def _documents(corpora: list[Path]) -> list[Document]:
    seen: dict[str, Document] = {}
    for corpus in corpora:
        for r in read_jsonl(corpus):
            seen.setdefault(r["id"], Document(id=r["id"], title=r.get("title", ""), text=r["text"]))
    return list(seen.values())


def _entries_for(docs: list[Document]) -> int:
    """Pool entries the synthetic index of ``docs`` has (leaves, summaries, aggregates, their summaries)."""
    names: dict[str, int] = {}
    for d in docs:
        for sentence in SENTENCE.split(d.text):
            for name in dict.fromkeys(NAME.findall(sentence)):
                names[name] = names.get(name, 0) + 1
    aggs = sum(1 for n in names.values() if n >= 2)

    def tree(n: int) -> int:
        total = n
        for _ in range(3):
            n = -(-n // 6)
            total += n
        return total
    return tree(len(docs)) + tree(aggs)


def pick_documents(corpora: list[Path], entries: int | None) -> list[Document]:
    """The documents of ``corpora``; with ``entries``, the first ones whose synthetic pool has about that
    many entries (a few proportional steps)."""
    docs = _documents(corpora)
    if not entries:
        return docs
    n = min(len(docs), entries // 2)
    for _ in range(4):
        got = _entries_for(docs[:n])
        n = min(len(docs), round(n * entries / got))
    if _entries_for(docs[:n]) < entries * 0.97:
        raise SystemExit(f"--entries {entries}: the corpora give only {_entries_for(docs)} entries")
    return docs[:n]


def synthetic_index(docs: list[Document], out: Path) -> Path:
    chunks = [Chunk(id=Chunk.make_id(d.id, 0, d.text), doc_id=d.id, index=0, text=d.text, n_tokens=0) for d in docs]
    leaves = [Node(id=c.id, text=c.text, kind="leaf", tree="similarity", level=0, passages=(c.doc_id,)) for c in chunks]
    props = []
    for c in chunks:
        for i, sentence in enumerate(SENTENCE.split(c.text)):
            props.append(Proposition(id=Proposition.make_id(c.id, i, sentence), text=sentence,
                                     entities=tuple(dict.fromkeys(NAME.findall(sentence))), chunk_id=c.id,
                                     doc_id=c.doc_id, index=i))
    by_entity: dict[str, list[Proposition]] = {}
    for p in props:
        for e in p.entities:
            by_entity.setdefault(e, []).append(p)
    aggs = [Node(id=f"a{i}", text=" ".join(p.text for p in ps[:20]), kind="aggregate", tree="relatedness", level=0,
                 passages=tuple(dict.fromkeys(p.doc_id for p in ps[:20])), entity=e,
                 propositions=tuple(p.id for p in ps[:20]))
            for i, (e, ps) in enumerate(sorted(by_entity.items())) if len(ps) >= 2]
    entries = leaves + _summaries(leaves, "similarity", 3) + aggs + _summaries(aggs, "relatedness", 3)
    save_pool(out, Pool(entries=tuple(entries), embeddings=np.zeros((len(entries), 1), dtype=np.float32)))
    save_records(out, DOCUMENTS, docs)
    save_records(out, CHUNKS, chunks)
    save_records(out, PROPOSITIONS, [p for p in props if p.entities])
    save_graph(out / GRAPH_DIR, build_graph([d.id for d in docs], [p for p in props if p.entities]), embedder=None)
    write_manifest(out, config={"trees": ["similarity", "relatedness"]}, corpus={"documents": len(docs)},
                   components={"graph": {"type": "entity_graph", "path": GRAPH_DIR}}, embedder={"spec": "none"},
                   summarizer="synthetic (first sentences)", extractor="synthetic (capitalised names)",
                   counts={}, timings={})
    return out


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def sections(page: str) -> dict[str, int]:
    """Bytes (UTF-8) of each part of a report page: overview, each tree's markup, the embedded data
    (``data.embedded`` as written; ``data.json.*`` each key as plain compact JSON, entry texts apart),
    the vendored and the page's own script."""
    def size(text: str) -> int:
        return len(text.encode("utf-8"))

    parts: dict[str, int] = {"total": size(page)}
    found = re.search(r'<section id="overview">.*?</section>', page, re.S)
    parts["overview"] = size(found.group(0)) if found else 0
    for tree in ("similarity", "relatedness"):
        found = re.search(rf'<section id="tree-{tree}">.*?</section>', page, re.S)
        parts[f"tree_markup.{tree}"] = size(found.group(0)) if found else 0
    found = re.search(r'<script type="application/(json|octet-stream)" id="report-data">(.*?)</script>', page, re.S)
    if found:
        parts["data.embedded"] = size(found.group(2))
        data = json.loads(found.group(2)) if found.group(1) == "json" else decode_data(found.group(2))
        parts["data.json.total"] = _json_size(data)
        for key, value in data.items():
            parts[f"data.json.{key}"] = _json_size(value)
        parts["data.json.entries(texts)"] = _json_size([row[3] for row in data["entries"]])
    scripts = sorted(re.findall(r"<script>(.*?)</script>", page, re.S), key=len, reverse=True)
    parts["scripts.vendor"] = size(scripts[0]) if scripts else 0
    parts["scripts.page"] = sum(size(s) for s in scripts[1:])
    parts["rest"] = parts["total"] - parts["overview"] - parts["tree_markup.similarity"] - \
        parts["tree_markup.relatedness"] - parts.get("data.embedded", 0) - parts["scripts.vendor"] - \
        parts["scripts.page"]
    return parts


def render_seconds(page: Path) -> float:
    """Seconds headless Chromium takes from navigating to ``page`` until its script has finished."""
    from benchmarks.browser import DevTools, find_chromium

    browser = find_chromium()
    if browser is None:
        raise SystemExit("--browser: no Chromium installed")
    with DevTools(browser) as tab:
        target = tab.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        tab.session = tab.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                               session=False)["sessionId"]
        tab.send("Page.enable")
        with Timer() as timer:
            tab.send("Page.navigate", {"url": page.resolve().as_uri()})
            tab.wait_for("document.URL.startsWith('file:') && document.body && document.body.dataset.ready === '1'",
                         timeout=300)
        return round(timer.wall_s, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("indexes", nargs="*")
    parser.add_argument("--synthetic", metavar="CORPUS", nargs="+")
    parser.add_argument("--entries", type=int, help="size of the synthetic pool (default: every passage)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--sections", action="store_true", help="bytes of each part of the page")
    parser.add_argument("--browser", action="store_true", help="time headless Chromium until the page is ready")
    add_json_argument(parser)
    args = parser.parse_args()
    report = Report("bench_inspect")
    rows = report.results.setdefault("indexes", [])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    out = Path(args.out)
    indexes = [Path(p) for p in args.indexes]
    if args.synthetic:
        docs = pick_documents([Path(c) for c in args.synthetic], args.entries)
        name = f"synthetic-{args.entries}" if args.entries else "synthetic-index"
        indexes.append(synthetic_index(docs, out / name))
    for index in indexes:
        with Timer() as timer:
            info = write_report(index, out / f"{index.name}.html", show_progress=False)
        row: dict[str, Any] = {
            "index": str(index), "entries": info.entries, "tree_nodes": info.tree_nodes,
            "graph_edges": info.graph_edges, "mb": round(info.bytes / 1e6, 2),
            "wall_s": round(timer.wall_s, 2), "cpu_s": round(timer.cpu_s, 2), "peak_rss_mib": peak_rss_mib()}
        if args.sections:
            row["sections_mb"] = {k: round(v / 1e6, 3) for k, v in
                                  sections(info.path.read_text(encoding="utf-8")).items()}
        if args.browser:
            row["chromium_ready_s"] = render_seconds(info.path)
        print(json.dumps(row), flush=True)
        rows.append(row)
    report.write(args.json_out)


if __name__ == "__main__":
    main()
