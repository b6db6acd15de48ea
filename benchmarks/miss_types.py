"""Question types and hop order for benchmarks/miss_map.py: MuSiQue's hop count, a type field (2Wiki's four
types), HotpotQA's bridge or comparison (its field, else a heuristic on the text), and MuSiQue's gold passages put
in hop order from its own ``question_decomposition``."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

_AUXILIARY = re.compile(r"^\s*(are|is|was|were|do|does|did|have|has|can|could)\b", re.I)
_TWO_NAMED = re.compile(r"\b(both|and|same|either|neither|in common)\b", re.I)
_WH = re.compile(r"\b(which|who|what|whose|whom)\b", re.I)


def hotpot_type(question: str) -> str:
    """HotpotQA's type guessed from the question (a heuristic): ``comparison`` for a yes/no question over two
    named things (it opens with an auxiliary verb and says "both", "and", "same", "either", "neither" or "in
    common") or for a wh-question offering a choice ("... or ..."), else ``bridge``. It agrees with the dataset's
    own ``type`` on 225 of the 241 bench rows that have one."""
    if _AUXILIARY.match(question) and _TWO_NAMED.search(question):
        return "comparison"
    if _WH.search(question) and re.search(r"\bor\b", question):
        return "comparison"
    return "bridge"


def question_types(rows: Mapping[str, Mapping[str, Any]], mode: str = "auto") -> tuple[dict[str, str], str]:
    """Question id -> type, and the mode used (``auto`` resolved from the rows' fields)."""
    if mode == "auto":
        kinds = {r.get("type") for r in rows.values()}
        mode = "hops" if any("hops" in r for r in rows.values()) else \
            "hotpot" if kinds <= {"bridge", "comparison", None} else "field"
    if mode == "hops":
        return {i: f"{r.get('hops', '?')} hops" for i, r in rows.items()}, mode
    if mode == "hotpot":
        return {i: r.get("type") or hotpot_type(str(r["question"])) for i, r in rows.items()}, mode
    return {i: str(r.get("type", "untyped")) for i, r in rows.items()}, mode


def hop_order(questions: Sequence[Any], texts: Mapping[str, str], sources: Sequence[str]) -> tuple[list[Any], int]:
    """The questions with their gold passages in hop order where one of the MuSiQue files ``sources`` (a JSON list
    or JSON lines of ``{id, paragraphs, question_decomposition}``) has the question: hop ``i`` is the gold passage
    whose text (``texts``: passage id -> text; white space collapsed) is that of step ``i``'s supporting paragraph.
    Also the number of questions reordered so (the others keep their order)."""
    def norm(text: str) -> str:
        return " ".join(text.split())

    steps: dict[str, list[str]] = {}
    for source in sources:
        raw = Path(source).read_text(encoding="utf-8")
        for row in json.loads(raw) if raw.lstrip().startswith("[") else map(json.loads, raw.splitlines()):
            support = [d.get("paragraph_support_idx") for d in row["question_decomposition"]]
            if None not in support:  # an unanswerable question names no paragraph for some step
                steps.setdefault(str(row["id"]), [norm(row["paragraphs"][i]["paragraph_text"]) for i in support])
    out, done = [], 0
    for q in questions:
        by_text = {norm(texts.get(g, "")): g for g in q.gold_passage_ids}
        order = [by_text.get(t) for t in steps.get(q.id, [])]
        if order and sorted(map(str, order)) == sorted(q.gold_passage_ids):
            q, done = replace(q, gold_passage_ids=tuple(order)), done + 1
        out.append(q)
    return out, done
