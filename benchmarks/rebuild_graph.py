"""Rebuild only the entity graph of a built index, from its documents.jsonl and propositions.jsonl.

Graph settings come from ``--config FILE.toml`` (its ``[graph]`` section) or the options
below; embeddings come from the embedding cache (``--cache``, default ``INDEX/cache``),
so a rebuild pays only for names it has not embedded before. INDEX is left alone: the
new folder ``--out DIR`` gets hard links to its files (same file system) and a graph of its own (a variant to
compare, or to search instead of INDEX).

    python -m benchmarks.rebuild_graph idx-musique --out idx-musique-tw3 --title-weight 3
    python -m benchmarks.rebuild_graph idx-musique --out idx-musique-m2v --name-vectors static --precision auto
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from benchmarks.harness import Report, Timer, add_json_argument
from sirerag.core.config import GraphConfig
from sirerag.core.config.sections import NAME_VECTORS
from sirerag.embedding import load_embedder
from sirerag.graph.store import GRAPH_DIR, build_and_save_graph
from sirerag.pool.store import register_component
from sirerag.pool.loaded import load_index


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("index")
    ap.add_argument("--out", required=True, help="write the variant index here (links to INDEX's files); must not exist")
    ap.add_argument("--cache", help="embedding cache folder (default INDEX/cache)")
    ap.add_argument("--title-weight", type=float)
    ap.add_argument("--embed-facts", action="store_true")
    ap.add_argument("--precision", default="float32", choices=("auto", "float32", "bfloat16"),
                    help="what the index embedder computes the names in (the build's default is auto)")
    ap.add_argument("--synonym-max-neighbors", type=int)
    ap.add_argument("--synonym-threshold", type=float)
    ap.add_argument("--name-vectors", choices=NAME_VECTORS, help="graph.name_vectors (default: the index's)")
    add_json_argument(ap)
    args = ap.parse_args()
    report = Report("rebuild_graph")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    src = Path(args.index)
    index = load_index(src)
    target = Path(args.out)
    if target.exists():
        raise SystemExit(f"{target}: already exists; give a new folder for the variant index")
    target.mkdir(parents=True)
    for item in src.iterdir():  # hard links: an index refuses files whose paths leave its folder (symlinks)
        if item.name not in (GRAPH_DIR, "manifest.json", "cache"):
            if item.is_dir():
                shutil.copytree(item, target / item.name, copy_function=os.link)
            else:
                os.link(item, target / item.name)
    shutil.copy(src / "manifest.json", target / "manifest.json")
    settings = dict(index.manifest.config.sections.get("graph", {}))
    config = GraphConfig(**{k: v for k, v in settings.items() if k in {f.name for f in dataclasses.fields(GraphConfig)}})
    changes: dict[str, Any] = {"enabled": True}
    for name in ("title_weight", "synonym_max_neighbors", "synonym_threshold", "name_vectors"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.embed_facts:
        changes["embed_facts"] = True
    config = dataclasses.replace(config, **changes)
    config.validate()
    record = index.manifest.embedder
    spec = (record.load_spec or record.spec) if record is not None else None
    if spec is None:
        raise SystemExit(f"{src}: the manifest names no embedder; nothing to embed the graph's names with")
    cache = Path(args.cache) if args.cache else src / "cache"
    embedder = load_embedder(spec, cache_dir=cache / "embeddings", show_progress=False, precision=args.precision)
    with Timer() as timer:
        info = build_and_save_graph(target, index.documents(), index.propositions(), embedder=embedder, config=config,
                                    pool=index.pool, chunk_texts=(c.text for c in index.chunks()),
                                    ner=index.manifest.build_config().extraction.ner)
        register_component(target, "graph", **info)
    report.results.update({"index": str(src), "variant": str(target), "graph_config": dataclasses.asdict(config),
                           "seconds": round(timer.wall_s, 1), **timer.to_dict(ndigits=2), "stats": info["stats"]})
    report.write(args.json_out)


if __name__ == "__main__":
    main()
