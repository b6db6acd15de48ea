"""Both trees as nested ``<details>`` elements: readable and collapsible with JavaScript off.

Each node shows its kind, level, a text preview and the counts of its children and
passages; a leaf also shows its passage's title, an aggregate its entity. The full texts
are not repeated here: the page's script adds them from the embedded JSON when a node
is opened. The markup is kept small, since a 30k-entry pool has 30k of these nodes:
``<details class="node k-KIND" id="nPOS"><summary><i>KIND Llevel</i> <b>title</b> preview
<small>counts</small></summary><div class="kids">children</div></details>``, styled by the
kind class. A node with several parents (soft clustering) is shown under each of them;
only its first appearance carries the anchor ``id="n<position>"`` that links point to,
the others ``data-i="<position>"``.
"""
from __future__ import annotations

import html
import logging
import time

from tqdm.auto import tqdm

from sirerag.report.collect import ReportData

logger = logging.getLogger(__name__)

PREVIEW_CHARS = 100
SEP = " \u00b7 "


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """The first ``limit`` characters of ``text`` on one line, with an ellipsis when cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


def text(value: str) -> str:
    """``value`` escaped for element content (``&``, ``<``, ``>``; quotes need no escaping there)."""
    return html.escape(value, quote=False)


class TreeWriter:
    """Writes the ``<details>`` hierarchy of one or both trees."""

    def __init__(self, data: ReportData, *, show_progress: bool = True) -> None:
        self.data = data
        self.anchored: set[int] = set()
        self.written = 0
        self.show_progress = show_progress

    def node(self, i: int, out: list[str], bar: tqdm) -> None:
        data = self.data
        e = data.entries[i]
        kids = data.children[i]
        self.written += 1
        bar.update(1)
        if i not in self.anchored:
            self.anchored.add(i)
            anchor = f' id="n{i}"'
        else:
            anchor = f' data-i="{i}"'
        if e.kind == "leaf":
            title = data.title(i)
            head = f"<b>{text(title)}</b> " if title else ""
        elif e.kind == "aggregate":
            head = f"<b>{text(e.entity or '')}</b> "
        else:
            head = ""
        counts = []
        if kids:
            counts.append(f"{len(kids)} children")
        counts.append(f"{len(e.passages)} passage{'s' if len(e.passages) != 1 else ''}")
        if e.kind == "aggregate":
            counts.append(f"{len(e.propositions)} propositions")
        out.append(f'<details class="node k-{e.kind}"{anchor}><summary><i>{e.kind} L{e.level}</i> {head}'
                   f"{text(preview(e.text))} <small>{SEP.join(counts)}</small></summary>")
        if kids:
            out.append('<div class="kids">')
            for c in sorted(kids, key=lambda c: (-data.entries[c].level, c)):
                self.node(c, out, bar)
            out.append("</div>")
        out.append("</details>")

    def tree(self, name: str) -> str:
        """HTML of one tree (roots highest level first); '' when the index has no such tree."""
        roots = self.data.roots.get(name, [])
        if not roots:
            return ""
        start, before = time.perf_counter(), self.written
        out: list[str] = [f'<div class="tree" data-tree="{name}">']
        with tqdm(desc=f"report: {name} tree", unit="node", disable=not self.show_progress, leave=False) as bar:
            for r in roots:
                self.node(r, out, bar)
        out.append("</div>")
        logger.info("report: %s tree: %d roots, %d nodes written in %.1fs", name, len(roots), self.written - before,
                    time.perf_counter() - start)
        return "".join(out)
