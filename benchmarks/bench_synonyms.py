"""The synonym edges of a built index's entity graph found exactly and through HNSW
(``sirerag.graph.synonyms.synonym_edges``; ``graph.synonym_ann_min_names``).

Example (from the repository root)::

    python -m benchmarks.bench_synonyms /tmp/scale/work/index-30000 --json synonyms_30k.json

The names are the graph's entity nodes with at least 3 alphanumeric characters, their vectors the stored
``graph/entity_embeddings.npy``; the threshold and the cap are the graph's recorded settings. For each search
(``--search``, in order) it reports wall and CPU seconds and the edges; with both, how many of the exact edges
the HNSW search found and how many it added.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks.harness import Report, Timer, add_json_argument, peak_rss_mib


def main(argv: list[str] | None = None) -> int:
    from sirerag.core.config import DenseConfig
    from sirerag.core.io import load_npy
    from sirerag.graph.synonyms import MIN_SYNONYM_CHARS, alnum_count, synonym_edges

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("index", help="a built index with an entity graph")
    parser.add_argument("--search", default="exact,hnsw", help="comma-separated: exact, hnsw")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    report = Report("bench_synonyms", argv)
    graph = Path(args.index) / "graph"
    settings = json.loads((graph / "graph.json").read_text(encoding="utf-8")).get("settings", {})
    threshold = float(settings.get("synonym_threshold", 0.8))
    cap = int(settings.get("synonym_max_neighbors", 100))
    vectors = load_npy(graph / "entity_embeddings.npy", mmap=True)
    names = json.loads((graph / "node_names.json").read_text(encoding="utf-8"))[:vectors.shape[0]]
    eligible = np.array([alnum_count(name) >= MIN_SYNONYM_CHARS for name in names], dtype=bool)
    rows = np.ascontiguousarray(vectors[eligible], dtype=np.float32)
    runs, pairs = [], {}
    for search in args.search.split(","):
        with Timer() as took:
            found = synonym_edges(rows, threshold=threshold, max_neighbors=cap,
                                  ann=DenseConfig() if search == "hnsw" else None)
        pairs[search] = set(zip(found[0].tolist(), found[1].tolist()))
        runs.append({"search": search, **took.to_dict(), "edges": len(found[0]), "peak_rss_mib": peak_rss_mib()})
    compared = {}
    if {"exact", "hnsw"} <= set(pairs):
        common = len(pairs["exact"] & pairs["hnsw"])
        compared = {"of_exact": round(common / max(1, len(pairs["exact"])), 5),
                    "not_in_exact": len(pairs["hnsw"] - pairs["exact"])}
    report.results.update(index=args.index, names=len(names), eligible=int(eligible.sum()), threshold=threshold,
                          max_neighbors=cap, runs=runs, **compared)
    report.write(args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
