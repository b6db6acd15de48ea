"""The statistics of an index: the paper's Table 3 figures and the pool's make-up by tree, kind and level."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sirerag.extraction.extractor import FAILURES
from sirerag.core.io import read_jsonl
from sirerag.pool.loaded import LoadedIndex, load_index
from sirerag.trees.aggregates import RULE_ALL, RULE_SKIP, table3_stats


def index_stats(directory: str | Path | LoadedIndex) -> dict[str, Any]:
    """Statistics of an index (a directory or a loaded :class:`~sirerag.pool.loaded.LoadedIndex`),
    computed from its files (not from the build log).

    Raises:
        IndexFormatError: the directory is not a readable index.
    """
    index = directory if isinstance(directory, LoadedIndex) else load_index(directory)
    manifest = index.manifest
    entries = index.pool.entries
    propositions = index.propositions()
    table3 = table3_stats(propositions)
    aggregates = [e for e in entries if e.kind == "aggregate"]
    relatedness = manifest.build_config().relatedness
    relatedness_counts = manifest.counts.relatedness_tree
    rule = relatedness_counts.aggregation_rule if relatedness_counts is not None else None
    if rule is None and "relatedness" in manifest.trees:
        rule = RULE_SKIP if relatedness.skip_redundant_entities else RULE_ALL
    failures_path = index.path / FAILURES
    failures: dict[str, int] = {}
    if FAILURES in manifest.files:
        with index.reading():
            rows = list(read_jsonl(failures_path))
        for record in rows:
            stage = str(record.get("stage", "unknown"))
            failures[stage] = failures.get(stage, 0) + 1
    return {
        "index": str(index.path),
        "documents": manifest.documents,
        "chunks": len(index.chunks()),
        **table3,
        "aggregates": len(aggregates),
        "aggregated_entities": len({(e.entity or "").casefold() for e in aggregates}),
        "pool_entries": len(entries),
        "pool": index.pool.counts(),
        "extraction_failures": {"extract": failures.get("extract", 0), "rewrite_fallbacks": failures.get("rewrite", 0)},
        "extractor": manifest.extractor,
        "aggregation_rule": rule,
        "aggregate_max_tokens": relatedness.aggregate_max_tokens,
        "relatedness_variant": relatedness_counts.variant if relatedness_counts is not None else None,
        "embedder": manifest.embedder.spec if manifest.embedder is not None else None,
        "summarizer": manifest.summarizer,
        "drift": {**manifest.drift.to_dict(), "share": manifest.drift.measured_share} if manifest.drift
        else {"share": 0.0, "leaves_added": 0, "leaves_removed": 0},
        "updates": len(manifest.history),
    }


def format_stats(stats: dict[str, Any]) -> str:
    """The statistics as an aligned plain-text table."""
    per = stats["propositions_per_entity"]
    rows = [
        ("chunks", stats["chunks"]),
        ("propositions", stats["propositions"]),
        ("  with entities", stats["propositions_with_entities"]),
        ("  without entities (dropped)", stats["propositions_without_entities"]),
        ("entities", stats["entities"]),
        ("proposition aggregates", stats["aggregates"]),
        ("propositions per entity", f"avg {per['avg']}  max {per['max']}  min {per['min']}"),
    ]
    lines = [f"index {stats['index']}  ({stats['documents']} documents)", "", "Table 3 figures"]
    lines += [f"  {name:<32}{value}" for name, value in rows]
    lines += ["", f"  {'extractor':<32}{stats['extractor'] or '-'}",
              f"  {'aggregation rule':<32}{stats['aggregation_rule'] or '-'}"
              + (f" (cap {stats['aggregate_max_tokens']} tokens)"
                 if stats["aggregation_rule"] and stats["aggregate_max_tokens"] else ""),
              f"  {'relatedness variant':<32}{stats['relatedness_variant'] or '-'}",
              f"  {'extraction failures':<32}{stats['extraction_failures']['extract']} "
              f"(rewrite fallbacks {stats['extraction_failures']['rewrite_fallbacks']})",
              f"  {'embedder':<32}{stats['embedder'] or '-'}",
              f"  {'summaries':<32}{stats['summarizer'] or '-'}",
              "", f"pool: {stats['pool_entries']} entries"]
    lines += [f"  {key:<32}{n}" for key, n in stats["pool"].items()]
    drift = stats.get("drift") or {}
    lines += ["", f"  {'drift since full build':<32}{drift.get('share', 0.0):.1%} of its leaves "
              f"(+{drift.get('leaves_added', 0)} -{drift.get('leaves_removed', 0)}; "
              f"{stats.get('updates', 0)} add/remove run(s))",
              f"  {'stale summaries':<32}{drift.get('summaries_stale', 0)} (kept their text, members changed)"]
    return "\n".join(lines)
