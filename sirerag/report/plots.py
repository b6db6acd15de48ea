"""Evaluation plots (matplotlib, Agg backend): passage recall@k for k = 1..20 and answer
recall against the token budget, for one run or several overlaid; and the comparison table.

Inputs are the JSON results of ``sirerag eval --json`` (older results without
``passage_recall_curve`` are drawn from their ``passage_recall@k`` points).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from sirerag.core.errors import InputError, require
from sirerag.core.io import atomic_path, read_json
from sirerag.core.io.guard import GENERATOR

#: figure size in pixels (width, height) at :data:`DPI`
SIZE = (1100, 420)
DPI = 100
_AT = re.compile(r"^(passage_recall|answer_recall)@(\d+)$")
_RANK = re.compile(r"^(ndcg|mrr)@(\d+)$")


def load_results(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Read eval JSON files; each must hold at least one ``passage_recall@k`` or ``answer_recall@T``.

    Raises:
        InputError: a file is not such a result.
    """
    out = []
    for path in paths:
        result = read_json(path)
        if not isinstance(result, dict) or not any(_AT.match(k) for k in result):
            raise InputError(f"{path}: not a 'sirerag eval --json' result (no passage_recall@k or answer_recall@T)")
        out.append(result)
    return out


def label_of(result: dict[str, Any]) -> str:
    """``retriever on index-folder`` (the index's last path component)."""
    index = Path(str(result.get("index", "?"))).name
    return f"{result.get('retriever', '?')} on {index}"


def series(result: dict[str, Any], metric: str) -> tuple[list[int], list[float]]:
    """``(xs, ys)`` of ``passage_recall`` (k) or ``answer_recall`` (token budget), sorted by x; a full
    k = 1..20 curve is used for passage recall when the result has one."""
    if metric == "passage_recall" and isinstance(result.get("passage_recall_curve"), list):
        ys = [float(v) for v in result["passage_recall_curve"]]
        return list(range(1, len(ys) + 1)), ys
    points = sorted((int(m.group(2)), float(v)) for k, v in result.items()
                    if (m := _AT.match(k)) and m.group(1) == metric and v is not None)
    return [x for x, _ in points], [y for _, y in points]


def plot_results(results: Sequence[dict[str, Any]], out: str | Path, labels: Sequence[str] | None = None) -> Path:
    """Draw passage recall@k and answer recall@T of every result into one PNG of :data:`SIZE` pixels.

    Raises:
        MissingExtraError: matplotlib is not installed (extra ``plot``).
        InputError: ``labels`` has another length than ``results``.
    """
    require("matplotlib", "plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(labels) if labels else [label_of(r) for r in results]
    if len(names) != len(results):
        raise InputError(f"--labels: {len(names)} labels for {len(results)} results")
    fig, (left, right) = plt.subplots(1, 2, figsize=(SIZE[0] / DPI, SIZE[1] / DPI), dpi=DPI)
    budgets: set[int] = set()
    try:
        for result, name in zip(results, names):
            xs, ys = series(result, "passage_recall")
            if xs:
                left.plot(xs, ys, marker="o", markersize=3, label=name)
            xs, ys = series(result, "answer_recall")
            budgets.update(xs)
            if xs:
                right.plot(xs, ys, marker="o", label=name)
        left.set(title="passage recall@k", xlabel="k (passages)", ylabel="recall", xlim=(0.5, 20.5), ylim=(0, 1))
        left.set_xticks([1, 2, 5, 10, 15, 20])
        right.set(title="answer recall within a token budget", xlabel="reading budget (cl100k tokens)",
                  ylabel="answer recall", ylim=(0, 1))
        right.set_xscale("log", base=2)
        if budgets:
            right.set_xticks(sorted(budgets), [str(b) for b in sorted(budgets)])
        for ax in (left, right):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        out = Path(out)
        with atomic_path(out) as tmp:  # the Software tag marks it as sirerag's (the output guard knows it again)
            fig.savefig(tmp, dpi=DPI, format="png", metadata={"Software": GENERATOR})
    finally:
        plt.close(fig)
    return out


def comparison_table(results: Sequence[dict[str, Any]], labels: Sequence[str] | None = None) -> str:
    """The metrics of several results side by side as aligned text (one column per result): passage recall@k,
    answer recall@T, nDCG@k and MRR@k, then what ranked them (retriever, pool rule, leaf share) and the counts."""
    names = list(labels) if labels else [label_of(r) for r in results]
    keys: list[str] = []
    for r in results:
        keys += [k for k in r if _AT.match(k) and k not in keys]
    keys.sort(key=lambda k: (_AT.match(k).group(1) != "passage_recall", int(_AT.match(k).group(2))))  # type: ignore[union-attr]
    ranks = sorted((k for r in results for k in r if _RANK.match(k)), key=lambda k: (k.split("@")[0] != "ndcg",
                                                                                   int(k.split("@")[1])))
    keys += list(dict.fromkeys(ranks))
    keys += ["retriever", "pool_rule", "leaf_share", "lift_ratio", "n_questions", "pool_entries"]
    width = max([len(n) for n in names] + [8]) + 2
    lines = [f"{'':<22}" + "".join(f"{n:>{width}}" for n in names)]
    for key in keys:
        cells = []
        for r in results:
            v = r.get(key)
            cells.append("n/a" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v))
        lines.append(f"{key:<22}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)
