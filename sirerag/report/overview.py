"""The overview section of the report: manifest, Table 3 figures, pool counts with a bar chart.

Plain HTML and inline SVG, so it reads the same with JavaScript off.
"""
from __future__ import annotations

import html
import json
from typing import Any, Iterable

from sirerag.core.io.manifest import Component, Manifest
from sirerag.report.stats import format_stats

KIND_COLOURS = {"leaf": "#4e79a7", "summary": "#f28e2b", "aggregate": "#59a14f", "proposition": "#b07aa1"}


def _cell(value: Any) -> str:
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False)
    return html.escape("-" if value is None else str(value))


def _flatten(value: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


def table(rows: Iterable[tuple[str, object]], cls: str = "kv") -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{_cell(v)}</td></tr>" for k, v in rows)
    return f'<table class="{cls}">{body}</table>'


def pool_chart(pool: dict[str, int], width: int = 560, bar: int = 18) -> str:
    """Horizontal bars, one per ``tree/kind/level`` key, coloured by kind (inline SVG)."""
    if not pool:
        return ""
    top = max(pool.values()) or 1
    label_w = 230
    rows = []
    for n, (key, count) in enumerate(pool.items()):
        y = n * (bar + 6)
        kind = key.split("/")[1] if key.count("/") >= 1 else ""
        w = max(1, round((width - label_w - 60) * count / top))
        rows.append(f'<text x="{label_w - 6}" y="{y + bar - 5}" text-anchor="end">{html.escape(key)}</text>'
                    f'<rect x="{label_w}" y="{y}" width="{w}" height="{bar}" fill="{KIND_COLOURS.get(kind, "#999")}">'
                    f"<title>{html.escape(key)}: {count}</title></rect>"
                    f'<text x="{label_w + w + 4}" y="{y + bar - 5}">{count}</text>')
    height = len(pool) * (bar + 6)
    return (f'<svg class="chart" role="img" aria-label="pool entries per tree, kind and level" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">{"".join(rows)}</svg>')


def overview(manifest: Manifest, stats: dict[str, Any], graph_meta: Component | None) -> str:
    """The overview section's HTML."""
    head = [
        ("index", stats.get("index")),
        ("sirerag version", manifest.sirerag_version),
        ("documents", stats.get("documents")),
        ("pool entries", stats.get("pool_entries")),
        ("embedder", manifest.embedder.spec if manifest.embedder is not None else None),
        ("summariser", manifest.summarizer),
        ("extractor", manifest.extractor),
        ("trees", ", ".join(manifest.trees) or "none (leaves only)"),
        ("entity graph", "yes" if graph_meta else "no (build with --graph)"),
    ]
    timings = list(_flatten(manifest.timings))
    settings = list(_flatten(manifest.config.to_dict()))
    counts = list(_flatten(manifest.counts.to_dict()))
    parts = [
        '<section id="overview"><h2>Overview</h2><div class="cols"><div>', table(head),
        "<h3>Pool by tree, kind and level</h3>", pool_chart(stats.get("pool", {})),
        '</div><div><h3>Statistics (paper Table 3; <code>sirerag stats</code>)</h3>',
        f'<pre class="stats">{html.escape(format_stats(stats))}</pre>',
        "</div></div>",
        f"<details><summary>Timings ({len(timings)})</summary>{table(timings, 'kv small')}</details>",
        f"<details><summary>Settings ({len(settings)})</summary>{table(settings, 'kv small')}</details>",
        f"<details><summary>Build counts ({len(counts)})</summary>{table(counts, 'kv small')}</details>",
    ]
    if graph_meta is not None:
        graph_rows = list(_flatten({k: v for k, v in graph_meta.to_dict().items() if k != "path"}))
        parts.append(f"<details><summary>Entity graph ({len(graph_rows)})</summary>"
                     f"{table(graph_rows, 'kv small')}</details>")
    parts.append("</section>")
    return "".join(parts)
