"""Size and render time of ``sirerag inspect`` reports.

    python scripts/bench_inspect.py INDEX [INDEX ...] --out /tmp/reports
    python scripts/bench_inspect.py --synthetic ../shared/bench/2wikimultihopqa/corpus.jsonl --out /tmp/reports

``--synthetic`` makes a pool of realistic size without any model: the corpus passages
as leaves, three levels of summaries over groups of six, one aggregate per capitalised
name that occurs in two or more sentences (its sentences as propositions), summaries over
those, and the entity graph of the sentences (no synonym edges). Prints one JSON line per
index: entries, tree nodes, graph edges, bytes, seconds.
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import resource
import time
from pathlib import Path

import numpy as np

from sirerag.graph.build import build_graph
from sirerag.graph.store import GRAPH_DIR, save_graph
from sirerag.io import read_jsonl, write_manifest
from sirerag.pool import CHUNKS, DOCUMENTS, PROPOSITIONS, save_pool, save_records
from sirerag.report.render import write_report
from sirerag.types import Chunk, Document, Node, Pool, Proposition

NAME = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _summaries(children: list[Node], tree: str, levels: int) -> list[Node]:
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


def synthetic_index(corpus: Path, out: Path) -> Path:
    docs = [Document(id=r["id"], title=r.get("title", ""), text=r["text"]) for r in read_jsonl(corpus)]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("indexes", nargs="*")
    parser.add_argument("--synthetic", metavar="CORPUS")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    out = Path(args.out)
    indexes = [Path(p) for p in args.indexes]
    if args.synthetic:
        indexes.append(synthetic_index(Path(args.synthetic), out / "synthetic-index"))
    for index in indexes:
        start, cpu = time.perf_counter(), time.process_time()
        info = write_report(index, out / f"{index.name}.html", show_progress=False)
        print(json.dumps({"index": str(index), "entries": info.entries, "tree_nodes": info.tree_nodes,
                          "graph_edges": info.graph_edges, "mb": round(info.bytes / 1e6, 2),
                          "wall_s": round(time.perf_counter() - start, 2), "cpu_s": round(time.process_time() - cpu, 2),
                          "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))


if __name__ == "__main__":
    main()
