"""A small hand-made index (no model) for the report tests: both trees, aggregates, an entity graph,
and corpus text that tries to inject HTML."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sirerag.graph.build import build_graph
from sirerag.graph.store import GRAPH_DIR, save_graph
from sirerag.core.io import write_manifest
from sirerag.pool.store import CHUNKS, DOCUMENTS, PROPOSITIONS, save_pool, save_records
from sirerag.core.types import Chunk, Document, Node, Pool, Proposition

XSS = "<script>alert(1)</script>"
DOCS = [
    ("Ada Lovelace", "Ada Lovelace worked with Charles Babbage on the Analytical Engine."),
    ("Charles Babbage", "Charles Babbage designed the Analytical Engine in London."),
    ("Injected <b>title</b>", f"This passage says {XSS} and mentions London and Charles Babbage."),
    ("London", "London is the capital of England. Ada Lovelace was born in London."),
]
ENTITIES = [("Ada Lovelace", "Charles Babbage", "Analytical Engine"), ("Charles Babbage", "Analytical Engine", "London"),
            ("London", "Charles Babbage"), ("London", "England", "Ada Lovelace")]


def make_index(out: Path) -> Path:
    docs = [Document(id=f"p{i}", title=t, text=x) for i, (t, x) in enumerate(DOCS)]
    chunks = [Chunk(id=Chunk.make_id(d.id, 0, d.text), doc_id=d.id, index=0, text=d.text, n_tokens=12) for d in docs]
    props = [Proposition(id=Proposition.make_id(c.id, 0, c.text), text=c.text, entities=ents, chunk_id=c.id,
                         doc_id=c.doc_id, index=0) for c, ents in zip(chunks, ENTITIES)]
    leaves = [Node(id=c.id, text=c.text, kind="leaf", tree="similarity", level=0, passages=(c.doc_id,)) for c in chunks]
    s1 = [Node(id=f"s1{i}", text=f"Summary {i}: " + " ".join(n.text for n in pair), kind="summary", tree="similarity",
               level=1, children=tuple(n.id for n in pair), passages=tuple(n.passages[0] for n in pair))
          for i, pair in enumerate([leaves[:2], leaves[1:]])]  # leaf 1 sits under both (soft clustering)
    top = Node(id="s2", text="Top summary. " + s1[0].text, kind="summary", tree="similarity", level=2,
               children=tuple(n.id for n in s1), passages=tuple(d.id for d in docs))
    aggs = []
    for entity in ("Charles Babbage", "London"):
        members = [p for p in props if entity in p.entities]
        aggs.append(Node(id=f"a-{entity}", text=" ".join(p.text for p in members), kind="aggregate",
                         tree="relatedness", level=0, passages=tuple(dict.fromkeys(p.doc_id for p in members)),
                         entity=entity, propositions=tuple(p.id for p in members)))
    rtop = Node(id="r1", text="Relatedness summary. " + aggs[0].text, kind="summary", tree="relatedness", level=1,
                children=tuple(a.id for a in aggs), passages=tuple(d.id for d in docs))
    entries = tuple(leaves + s1 + [top] + aggs + [rtop])
    save_pool(out, Pool(entries=entries, embeddings=np.eye(len(entries), 8, dtype=np.float32)))
    save_records(out, DOCUMENTS, docs)
    save_records(out, CHUNKS, chunks)
    save_records(out, PROPOSITIONS, props)
    graph = build_graph([d.id for d in docs], props, embedder=None)
    save_graph(out / GRAPH_DIR, graph, embedder=None)
    write_manifest(out, config={"trees": ["similarity", "relatedness"]}, corpus={"documents": len(docs)},
                   components={"graph": {"type": "entity_graph", "path": GRAPH_DIR}}, embedder={"spec": "none"},
                   summarizer="hand-written", extractor="hand-written", counts={}, timings={"total": 0.0})
    return out
