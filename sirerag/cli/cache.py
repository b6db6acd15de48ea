"""``sirerag cache stats DIR``: what the LLM call cache holds and what runs spent;
``sirerag cache verify DIR``: ``PRAGMA integrity_check`` of every SQLite cache under DIR;
``sirerag cache query-model``: export MiniLM to ONNX once per machine, so dense searches start fast."""
from __future__ import annotations

import argparse
import json

from sirerag.cli.common import Subparsers, add_common


def register(sub: Subparsers) -> None:
    p = sub.add_parser("cache", help="inspect the LLM call cache; export the ONNX query model",
                       description="Inspect the SQLite cache of LLM calls written by builds and evaluations, "
                                   "or export MiniLM to ONNX for fast dense searches.")
    actions = p.add_subparsers(dest="cache_action", metavar="ACTION")
    stats = actions.add_parser("stats", help="entries, hits, misses and tokens",
                               description="Entries and tokens stored, and hits/misses of every run so far.")
    stats.add_argument("path", help="an index directory (uses DIR/cache/llm), a cache folder or a calls.sqlite file")
    stats.add_argument("--json", action="store_true", help="print the statistics as JSON")
    add_common(stats)
    stats.set_defaults(func=run_stats)
    verify = actions.add_parser("verify", help="check every SQLite cache file for damage",
                                description="Run SQLite's integrity check on every .sqlite file under a folder "
                                            "(an index's cache/, a --cache folder) or on one file.")
    verify.add_argument("path", help="an index directory, a cache folder or one .sqlite file")
    add_common(verify)
    verify.set_defaults(func=run_verify)
    query = actions.add_parser("query-model", help="export MiniLM to ONNX for fast dense searches (once)",
                               description="Export the shipped MiniLM to ONNX in the per-user cache folder "
                                           "(once per machine; a build with the minilm embedder does it too), so "
                                           "dense searches of minilm indexes encode queries on ONNX Runtime "
                                           "without importing torch.")
    query.add_argument("--force", action="store_true", help="export again even if an export is there")
    add_common(query)
    query.set_defaults(func=run_query_model)
    add_common(p)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_stats(args: argparse.Namespace) -> int:
    from sirerag.core.errors import InputError
    from sirerag.llm.cache import CallCache, resolve_db

    db = resolve_db(args.path)
    if not db.is_file():
        raise InputError(f"no LLM call cache at {args.path} (looked for {db})")
    cache = CallCache(db)
    try:
        stats = cache.stats()
    finally:
        cache.close()
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    runs = stats["all_runs"]
    print(f"LLM call cache {stats['path']}")
    print(f"  entries {stats['entries']}: {stats['stored_prompt_tokens']} prompt + "
          f"{stats['stored_completion_tokens']} completion tokens stored")
    for row in stats["by_prompt"]:
        print(f"    {row['spec']}  {row['prompt_version']}: {row['entries']} entries, "
              f"{row['prompt_tokens']} + {row['completion_tokens']} tokens")
    print(f"  over {runs['runs']} runs: {runs['hits']} hits, {runs['misses']} misses, {runs['failures']} failures; "
          f"spent {runs['prompt_tokens']} prompt + {runs['completion_tokens']} completion tokens")
    last = stats.get("last_run")
    if last:
        print(f"  last run ({last['spec']}): {last['hits']} hits, {last['misses']} misses, "
              f"{last['failures']} failures; spent {last['prompt_tokens']} + {last['completion_tokens']} tokens")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from sirerag.core.errors import CacheError, InputError
    from sirerag.core.io.sqlite import damaged_cache, find_databases, integrity_problems

    databases = find_databases(args.path)
    if not databases:
        raise InputError(f"no SQLite cache (.sqlite file) at {args.path}")
    damaged = []
    for db in databases:
        problems = integrity_problems(db)
        print(f"{db}: {'ok' if not problems else 'DAMAGED: ' + '; '.join(problems[:3])}")
        if problems:
            damaged.append(damaged_cache(db, problems[0]))
    if damaged:
        raise CacheError(f"{len(damaged)} of {len(databases)} cache files damaged; first: {damaged[0]}")
    return 0


def run_query_model(args: argparse.Namespace) -> int:
    from sirerag.embedding.query_export import ensure_minilm_query_export
    from sirerag.embedding.query_encoder import query_model_dir

    export = ensure_minilm_query_export(force=args.force)
    folder = query_model_dir(export["key"])
    print(f"{'exported' if export['exported'] else 'already exported'}: {folder}"
          + (f" ({export['seconds']:.1f} s)" if export["exported"] else ""))
    return 0
