"""``write_report``: one self-contained HTML file that shows an index.

The page needs no network and no server: the CSS, the page script and the
vendored cytoscape.js (MIT, ``vendor/``) are inlined, and the data (full texts,
propositions, the entity graph) is embedded as gzip-compressed JSON in base64 in a
``<script type="application/octet-stream">``, which the page script unpacks with the
browser's ``DecompressionStream``: about a third of the plain JSON's size, and base64
can never close the script element. Corpus text that goes into HTML is escaped; the
page script writes it with ``textContent`` only.
"""
from __future__ import annotations

import base64
import gzip
import html
import json
import logging
import re
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

from sirerag.core.errors import InputError
from sirerag.core.io import atomic_path
from sirerag.core.io.guard import GENERATOR, check_file_out
from sirerag.pool.loaded import load_index
from sirerag.report.collect import collect, entries_json
from sirerag.report.overview import overview
from sirerag.report.questions import question_views, questions_html
from sirerag.report.stats import index_stats
from sirerag.report.trees import TreeWriter

logger = logging.getLogger(__name__)

_SLOT = re.compile(r"\{\{([A-Z_]+)\}\}")


@dataclass(frozen=True)
class ReportInfo:
    """What :func:`write_report` wrote."""

    path: Path
    bytes: int
    entries: int
    tree_nodes: int
    graph_edges: int
    seconds: float


def encode_data(value: object) -> str:
    """``value`` as compact JSON, gzip-compressed (level 6, no timestamp, so the same data gives the
    same bytes), in base64: safe inside any ``<script>`` element."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def decode_data(text: str) -> Any:  # Any: a JSON value
    """The value :func:`encode_data` encoded (for tests and benchmarks; the page decodes in JavaScript)."""
    return json.loads(gzip.decompress(base64.b64decode(text)).decode("utf-8"))


def _asset(name: str) -> str:
    return resources.files("sirerag.report").joinpath(name).read_text(encoding="utf-8")


def fill(template: str, parts: dict[str, str]) -> str:
    """Replace ``{{NAME}}`` slots of ``template`` in one pass (inserted text is never rescanned)."""
    return _SLOT.sub(lambda m: parts[m.group(1)], template)


def write_report(index_dir: str | Path, out: str | Path, *, entities: Sequence[str] = (), max_nodes: int = 60,
                 questions: Sequence[str] = (), questions_file: str | Path | None = None, limit: int | None = None,
                 retriever: str | None = None, show_progress: bool = True) -> ReportInfo:
    """Write the inspection report of an index directory to ``out``.

    Args:
        index_dir: an index written by ``sirerag build``.
        out: the HTML file to write (replaced atomically).
        entities: entity names offered as shortcuts; the first one is drawn when the page opens.
        max_nodes: most nodes drawn in an entity's neighbourhood.
        questions: questions to explain, one panel each (:mod:`sirerag.report.questions`).
        questions_file: a questions file (``{id, question, answers, gold_passage_ids}`` rows, as for
            ``sirerag eval``) whose questions are explained too, with their gold passages' ranks.
        limit: only the first ``limit`` questions of ``questions_file`` (default 10).
        retriever: the retriever that explains the questions (None: the index's default; PPR needs a graph).
        show_progress: progress bars for the long steps.

    Raises:
        IndexFormatError: ``index_dir`` is not a readable index.
        InputError: ``max_nodes`` or ``limit`` is below 1 or 2, a questions file is unreadable, or an entity
            (or ``retriever="ppr"``) is given for an index without a graph.
    """
    if not isinstance(max_nodes, int) or max_nodes < 2:
        raise InputError(f"--max-nodes must be an integer >= 2, got {max_nodes!r}")
    if retriever is not None:
        from sirerag.retrievers.registry import loader

        for part in str(retriever).split("+"):
            loader(part)  # ConfigError naming the retrievers there are, before any work
    golds: list[Any] = [None] * len(questions)
    if limit is not None and (questions_file is None or isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise InputError(f"--limit must be an integer >= 1 and goes with --questions, got {limit!r}")
    if questions_file is not None:
        from sirerag.evaluation.retrieval import load_questions

        rows = load_questions(questions_file, limit=limit or 10)
        questions = [*questions, *(q.question for q in rows)]
        golds += [q.gold_passage_ids for q in rows]
    shown = Path(out)
    out = check_file_out(out, "--out", inputs=[index_dir])  # before any work; a link stays a link
    start = time.perf_counter()
    logger.info("report: loading %s", index_dir)
    index = load_index(index_dir)
    stats = index_stats(index)
    data = collect(index)
    graph_dir = index.component("graph")
    graph_meta = index.manifest.component("graph") if graph_dir else None
    if graph_dir is not None:
        from sirerag.report.graphdata import graph_json

        with index.reading():  # graph/ of the loaded commit, or IndexChangedError
            index.check_arrays("graph/")
            data.graph = graph_json(graph_dir, data.doc_index)
    elif entities:
        raise InputError(f"{index.path}: --entity needs an entity graph; rebuild the index with --graph")
    views = question_views(index, questions, retriever=retriever, golds=golds) if questions else []
    writer = TreeWriter(data, show_progress=show_progress)
    trees = {name: writer.tree(name) for name in ("similarity", "relatedness")}
    payload = {
        "kinds": ["leaf", "summary", "aggregate", "proposition"], "trees": ["similarity", "relatedness"],
        "entries": entries_json(data), "titles": [title for _, title in data.docs], "props": data.props,
        "graph": data.graph, "entities": list(entities), "maxNodes": max_nodes,
    }
    t0 = time.perf_counter()
    blob = encode_data(payload)
    logger.info("report: data compressed to %.1f MB of base64 in %.1fs", len(blob) / 1e6, time.perf_counter() - t0)
    tree_html = "".join(
        f'<section id="tree-{name}"><h2>{name.capitalize()} tree</h2>'
        f'<p class="hint">{len(data.roots.get(name, []))} top nodes, highest level first; open a node to see '
        f"its children and its full text.</p>{body}</section>"
        for name, body in trees.items() if body
    ) or '<section><h2>Trees</h2><p>This index is a pool of leaves only (built with --trees none).</p></section>'
    page = fill(_asset("templates/report.html"), {
        "GENERATOR": html.escape(GENERATOR),
        "TITLE": html.escape(f"sirerag index {index.path.name}"),
        "HEADING": html.escape(str(index.path)),
        "CSS": _asset("templates/report.css"),
        "OVERVIEW": overview(index.manifest, stats, graph_meta),
        "TREES": tree_html,
        "GRAPH_HIDDEN": "" if data.graph else " hidden",
        "QUESTIONS_HIDDEN": "" if views else " hidden",
        "QUESTIONS": questions_html(views),
        "DATA": blob,
        "VENDOR": _asset("vendor/cytoscape.min.js").replace("</script", "<\\/script"),
        "SCRIPT": _asset("templates/report.js"),
    })
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        Path(tmp).write_text(page, encoding="utf-8")
    size = out.stat().st_size
    info = ReportInfo(path=shown, bytes=size, entries=len(data.entries), tree_nodes=writer.written,
                      graph_edges=len(data.graph["edges"]) // 4 if data.graph else 0,
                      seconds=round(time.perf_counter() - start, 2))
    logger.info("report: wrote %s (%.1f MB, %d entries, %d tree nodes) in %.1fs", out, size / 1e6, info.entries,
                info.tree_nodes, info.seconds)
    return info
