"""``sirerag build CORPUS --out DIR``: build an index directory."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sirerag.cli.common import Subparsers, add_common, add_follow_outside_links, progress_enabled
from sirerag.core.config.sections import EMBEDDER_PRECISIONS

TREE_HELP = "comma list from {similarity,relatedness}, or 'none' for a pool of leaves only (default: both)"


def register(sub: Subparsers) -> None:
    p = sub.add_parser("build", help="build an index from a corpus",
                       description="Build a SiReRAG index directory (manifest.json + entries.jsonl + embeddings.npy).")
    p.add_argument("corpus", help=".jsonl of {id?, title?, text} rows, a .json list of them, or a folder of .txt/.md")
    p.add_argument("--out", help="index directory to write (required unless --dry-run)")
    add_follow_outside_links(p)
    p.add_argument("--config", help="TOML file with build settings (command-line options override it)")
    p.add_argument("--trees", help=TREE_HELP)
    p.add_argument("--chunking", choices=["tokens", "passage"], help="tokens: 100-token chunks; passage: one per document")
    p.add_argument("--embedder", help="minilm (offline default), st:PATH_OR_NAME, openai:MODEL")
    p.add_argument("--precision", choices=EMBEDDER_PRECISIONS,
                   help="what a local embedder computes in (default auto: bfloat16 where the CPU has bfloat16 "
                        "instructions, else float32); int8: MiniLM's int8 ONNX export on ONNX Runtime for the "
                        "build's texts and the index's queries")
    p.add_argument("--seed", type=int, help="random_state for UMAP and the Gaussian mixtures (default 224)")
    p.add_argument("--llm", help="LLM for every stage that takes one: summaries, coreference rewrite and proposition "
                                 "extraction (unless --extractor offline), e.g. hf:smollm2, "
                                 "openai:MODEL@http://127.0.0.1:8000/v1; default: offline algorithms")
    p.add_argument("--extractor", choices=["offline", "llm"],
                   help="proposition extractor (default: llm with --llm, else offline)")
    p.add_argument("--extractor-llm", help="a separate LLM spec for extraction, e.g. hf:smollm2+adapter=DIR")
    p.add_argument("--ner", help="entity tagger of the offline extractor: rules (default), spacy:MODEL "
                                 "(an installed spaCy pipeline or a pipeline folder; needs sirerag[spacy]) or "
                                 "rules+spacy:MODEL (the union of both)")
    p.add_argument("--graph", action="store_true", help="also build the entity graph for --retriever ppr")
    p.add_argument("--cache", help="cache folder for model calls (default DIR/cache)")
    p.add_argument("--engine", choices=["local", "ray"],
                   help="where model stages run: local (this process, default) or ray (Ray Data actors; "
                        "needs sirerag[ray])")
    p.add_argument("--ray-address", help="with --engine ray: auto, HOST:PORT or ray://HOST:PORT of a running "
                                         "cluster (default: start a local Ray instance)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the LLM calls and tokens each stage would spend, calling no model, and each stage's "
                        "estimated wall time from this machine's measured throughput (the embedder's, calibrated "
                        "once per machine; an LLM server's, from 3 short requests)")
    p.add_argument("--no-time", action="store_true",
                   help="with --dry-run: no time estimate (no embedder calibration, no request to the LLM server)")
    p.add_argument("--json", dest="json_out", metavar="OUT", help="with --dry-run: also write the plan as JSON")
    add_common(p)
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace):  # noqa: ANN201 - BuildConfig
    from sirerag.core.config import BuildConfig, load_config

    config = load_config(args.config) if args.config else BuildConfig()
    overrides: dict[str, Any] = {}
    if args.trees is not None:
        trees = [t.strip() for t in args.trees.split(",") if t.strip()]
        overrides["trees"] = () if trees == ["none"] else tuple(trees)
    if args.seed is not None:
        overrides["seed"] = args.seed
    if args.chunking:
        overrides["chunking"] = {"mode": args.chunking}
    embedder = {key: value for key, value in (("spec", args.embedder), ("precision", args.precision)) if value}
    if embedder:
        overrides["embedder"] = embedder
    if args.llm:
        overrides["llm"] = {"spec": args.llm}
    extraction: dict[str, Any] = {}
    if args.extractor:
        extraction["extractor"] = args.extractor
    if args.extractor_llm:
        extraction["llm"] = args.extractor_llm
        extraction.setdefault("extractor", "llm")
    if getattr(args, "ner", None):
        extraction["ner"] = args.ner
    if extraction:
        overrides["extraction"] = extraction
    if args.graph:
        overrides["graph"] = {"enabled": True}
    if args.follow_outside_links:
        overrides["corpus"] = {"follow_outside_links": True}
    engine: dict[str, Any] = {}
    if getattr(args, "engine", None):
        engine["name"] = args.engine
    if getattr(args, "ray_address", None):
        engine["address"] = args.ray_address
        engine.setdefault("name", "ray")
    if engine:
        overrides["engine"] = engine
    return config.with_overrides(**overrides).validate()


def run(args: argparse.Namespace) -> int:
    from sirerag.core.errors import ConfigError
    from sirerag.pipeline.build import build_index

    config = config_from_args(args)
    if args.dry_run:
        return _dry_run(args, config)
    if not args.out:
        raise ConfigError("--out is required (the index directory to write), unless --dry-run is given")
    if config.trees:  # the trees cluster with UMAP: reuse its compiled functions from earlier runs
        from sirerag.cli.numba_cache import cache_umap_functions

        cache_umap_functions()
    report = build_index(Path(args.corpus), Path(args.out), config, cache_dir=args.cache,
                         show_progress=progress_enabled(args))
    summarizer = report.components.get("summarizer", "")
    label = " (offline extractive algorithm; no LLM configured)" if summarizer.startswith("extractive") else ""
    pool = report.counts.get("pool", {})
    print(f"index written to {report.out}")
    print(f"  documents {report.counts.get('documents')}, chunks {report.counts.get('chunks')}, "
          f"pool entries {pool.get('entries')}")
    for key, n in pool.get("by_tree_kind_level", {}).items():
        print(f"    {key}: {n}")
    print(f"  embedder: {report.components.get('embedder', {}).get('spec')}")
    print(f"  summaries: {summarizer}{label}")
    if "extractor" in report.components:
        print(f"  extractor: {report.components['extractor']}")
    print("  seconds: " + json.dumps(report.timings))
    sys.stdout.flush()
    return 0


def _dry_run(args: argparse.Namespace, config: Any) -> int:
    from sirerag.core.io import write_json
    from sirerag.core.io.guard import GENERATOR, check_file_out
    from sirerag.pipeline.dryrun import add_times, dry_run, format_report
    from sirerag.pipeline.timing import measure

    cache = args.cache or (Path(args.out) / "cache" if args.out else None)
    json_out = check_file_out(args.json_out, "--json", inputs=[args.corpus]) if args.json_out else None
    report = dry_run(Path(args.corpus), config, cache_dir=cache, show_progress=progress_enabled(args))
    if not args.no_time:
        add_times(report, measure(config))
    print(format_report(report))
    if json_out is not None:
        write_json(json_out, {"generator": GENERATOR, **report.to_dict()})
    return 0
