"""Where the default retriever loses recall@5, by question type: recall@2/5/10 per type, and every gold
passage missed at 5 with its rank and why the walk did not bring it.

    python -m benchmarks.miss_map INDEX QUESTIONS --split dev --json out.json --markdown out.md

The retriever is the index's default (``ppr``), ranked and scored by ``evaluate_retrieval`` as ``sirerag eval``
does; its query linking is read back with :func:`~sirerag.retrievers.ppr_explain.question_seeds`.

Question types (``--types``, ``auto`` picks by the fields; :mod:`benchmarks.miss_types`): ``hops`` (MuSiQue's
``hops``), ``field`` (the ``type`` field, 2Wiki's four types) and ``hotpot`` (HotpotQA's ``type`` where the row
has it, else ``hotpot_type``, a heuristic on the text). A gold passage's hop is its position in
``gold_passage_ids``, or, with ``--hop-order FILE ...`` (MuSiQue's own files: ``id``, ``paragraphs``,
``question_decomposition``), the decomposition step whose supporting paragraph has its text (``hop_order``); the
bench's gold lists are in paragraph order, which is the hop order for about a third of MuSiQue's questions only.

A missed gold passage falls in the first of these groups that holds (the entities of a passage are the graph's
entity nodes tied to it: its title and the entities of its propositions):

- ``linked``: one of its entities is linked from the question (a seed); the walk reached it and ranked it low;
- ``bridged``: one of its entities was reached by bridging from the seeds; reached, ranked low;
- ``named, not linked``: the question names its title (without a qualifier such as "(film)") or one of its
  entities, and linking did not pick it;
- ``extracted, not bridged``: it shares an entity with another gold passage of the question (the hop is in the
  graph), and bridging did not take it;
- ``hub only``: it is tied to the seeds, the bridges or the other gold passages only through hubs (entities in
  more than ``--hub`` passages, default :data:`HUB`, which count for none of the groups above);
- ``not extracted``: none of these: the entity that would tie it to the question or to the other gold passages
  is not in the graph (a variant of a name, a relation written only in words the extractor does not keep);
- ``not in graph``: the passage is not a passage node of the graph (not in the index).
"""
from __future__ import annotations

import argparse
import logging
import re
from collections import Counter
from typing import Any, Mapping, Sequence

from benchmarks.bench_pools import MemoEmbedder
from benchmarks.harness import Report, Timer, add_json_argument
from benchmarks.miss_types import hop_order, question_types

KS = (2, 5, 10)
GROUPS = ("linked", "bridged", "named, not linked", "extracted, not bridged", "hub only", "not extracted",
          "not in graph")
#: an entity in more passages than this (about 1% of a bench corpus) links nothing: PageRank spreads its mass
#: over all of them ("American", in 1,187 of 2Wiki's passages)
HUB = 50
#: where the rank bands of the missed passages start past the first ``k + 1``
BAND_STARTS = (11, 21, 51)
_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")


def _fold(text: str) -> str:
    from sirerag.graph.surface import fold

    return " " + re.sub(r"\W+", " ", fold(text)).strip() + " "


def _named(question: str, name: str) -> bool:
    folded = _fold(name)
    return sum(ch.isalnum() for ch in folded) >= 3 and folded in _fold(question)


def passage_entities(graph: Any, passage: str) -> list[int]:
    """The entity nodes tied to passage ``passage`` (its title and the entities of its propositions)."""
    node = graph.passage_index.get(passage)
    if node is None:
        return []
    neighbours = graph.adjacency.indices[graph.adjacency.indptr[node]:graph.adjacency.indptr[node + 1]]
    return sorted(int(n) for n in neighbours if n < graph.n_entities)


def classify(graph: Any, question: str, title: str, passage: str, others: Sequence[str], seeds: Any, *,
             hub: int = HUB) -> dict:
    """The group of a missed gold passage (module docstring; an entity in more than ``hub`` passages links
    nothing) and the evidence: the passage's linked entities (``[name, passages]``) and bridged ones (``[name,
    hop, passages]``), the ones the question names, and the entities it shares with the other gold passages
    ``others`` (``[name, passages]``, fewest passages first)."""
    if passage not in graph.passage_index:
        return {"group": "not in graph"}
    mine = passage_entities(graph, passage)
    linked = {node for _, node, _ in seeds.query_entities}
    bridged = {b.node: b.hop for b in seeds.bridges}
    shared = set().union(*(passage_entities(graph, o) for o in others)) if others else set()
    name, count = graph.entities.__getitem__, lambda n: int(graph.entity_passages[n])
    out: dict[str, Any] = {"entities": len(mine),
                           "linked": [[name(n), count(n)] for n in mine if n in linked],
                           "bridged": [[name(n), bridged[n], count(n)] for n in mine if n in bridged],
                           "named": [name(n) for n in mine if _named(question, name(n))],
                           "shared": sorted(([name(n), count(n)] for n in mine if n in shared), key=lambda x: x[1])}
    bare = _QUALIFIER.sub("", title)
    if _named(question, bare) and not {bare, title} & set(out["named"]):
        out["named"].append(title)  # "My Fair Lady" named, the passage titled "My Fair Lady (film)"
    def specific(rows: list) -> bool:
        return any(row[-1] <= hub for row in rows)

    group = "linked" if specific(out["linked"]) else "bridged" if specific(out["bridged"]) else \
        "named, not linked" if out["named"] else "extracted, not bridged" if specific(out["shared"]) else \
        "hub only" if out["linked"] or out["bridged"] or out["shared"] else "not extracted"
    return {"group": group, **out}


def breakdown(graph: Any, titles: Mapping[str, str], questions: Sequence[Any], rankings: Mapping[str, Sequence[str]],
              seeds: Sequence[Any], types: Mapping[str, str], *, k: int = 5, hub: int = HUB) -> dict:
    """Recall by type, every gold passage missed at ``k`` classified (:func:`classify`), and each question's
    count of linked and bridged entities, from the retriever's rankings and its linking of each question."""
    from sirerag.evaluation.metrics import passage_recall

    by_type: dict[str, dict[str, Any]] = {}
    misses: list[dict[str, Any]] = []
    asked: list[dict[str, Any]] = []  # per question: its linked and bridged entities, its recall at k
    positions: dict[tuple[str, int], Counter] = {}
    for q, s in zip(questions, seeds):
        kind, ranked, gold = types.get(q.id, "untyped"), list(rankings[q.id]), list(q.gold_passage_ids)
        row = by_type.setdefault(kind, {"questions": 0, "gold": 0, "missed": 0, "fallback": 0,
                                        **{f"recall@{n}": 0.0 for n in KS}, "groups": Counter()})
        row["questions"] += 1
        row["gold"] += len(gold)
        row["fallback"] += not s.entities
        asked.append({"id": q.id, "type": kind, "seeds": len(s.query_entities), "bridges": len(s.bridges),
                      f"recall@{k}": round(passage_recall(ranked, gold, k), 4)})
        for n in KS:
            row[f"recall@{n}"] += passage_recall(ranked, gold, n)
        found = set(ranked[:k])
        for hop, passage in enumerate(gold, 1):
            tally = positions.setdefault((kind, hop), Counter())
            tally["gold"] += 1
            if passage in found:
                continue
            rank = ranked.index(passage) + 1 if passage in ranked else None
            why = classify(graph, q.question, titles.get(passage, ""), passage, [g for g in gold if g != passage], s,
                           hub=hub)
            previous = gold[hop - 2] in found if hop > 1 else None
            misses.append({"question": q.id, "type": kind, "hop": hop, "of": len(gold), "passage": passage,
                           "title": titles.get(passage, ""), "rank": rank, "previous_found": previous, **why})
            row["missed"] += 1
            row["groups"][why["group"]] += 1
            tally["missed"] += 1
            tally[why["group"]] += 1
            tally["previous_found"] += bool(previous)
    for row in by_type.values():
        for n in KS:
            row[f"recall@{n}"] = round(row[f"recall@{n}"] / row["questions"], 4)
        row["groups"] = dict(row["groups"])
    bands: dict[str, Counter] = {}
    for m in misses:
        bands.setdefault(m["group"], Counter())[band(m["rank"], k)] += 1
    return {"k": k, "hub": hub, "by_type": dict(sorted(by_type.items())),
            "by_hop": [{"type": t, "hop": h, **dict(c)} for (t, h), c in sorted(positions.items())],
            "rank_bands": {g: dict(c) for g, c in bands.items()}, "misses": misses,
            "questions": asked}


def band_names(k: int) -> list[str]:
    """The rank bands of the passages missed at ``k``: for 5, ``6-10``, ``11-20``, ``21-50``, ``51+``."""
    starts = [k + 1, *(s for s in BAND_STARTS if s > k + 1)]
    return [f"{lo}-{hi - 1}" for lo, hi in zip(starts, starts[1:])] + [f"{starts[-1]}+"]


def band(rank: int | None, k: int = 5) -> str:
    """The rank band (:func:`band_names`) of a passage missed at ``k``, or ``unranked`` (past the search depth)."""
    if rank is None:
        return "unranked"
    return next(name for name in reversed(band_names(k)) if rank >= int(name.split("-")[0].rstrip("+")))


def run(index_dir: str, questions_path: str, *, split: str | None = None, limit: int | None = None,
        types: str = "auto", k: int = 5, hop_sources: Sequence[str] = (), hub: int = HUB) -> dict:
    """Evaluate the index's default retriever on the questions and map its misses at ``k`` (:func:`breakdown`),
    the gold passages in hop order from ``hop_sources`` (:func:`hop_order`) where they have the question."""
    from sirerag.core.io.files import read_jsonl_numbered
    from sirerag.evaluation.retrieval import evaluate_retrieval, load_questions
    from sirerag.pool.loaded import load_index
    from sirerag.retrievers import default_retriever, load_retriever
    from sirerag.retrievers.dense import index_embedder
    from sirerag.retrievers.ppr_explain import ppr_of, question_seeds

    index = load_index(index_dir)
    name, _ = default_retriever(index)
    if name != "ppr":
        raise SystemExit(f"{index_dir}: the default retriever is {name!r}, not ppr (build the index with --graph)")
    questions = load_questions(questions_path, split=split, limit=limit)
    rows = {str(r.get("id", n)): r for n, r in read_jsonl_numbered(questions_path)}
    kinds, mode = question_types({q.id: rows[q.id] for q in questions}, types)
    embedder = MemoEmbedder(index_embedder(index))
    retriever = load_retriever(None, index, embedder=embedder)
    with Timer() as timer:
        evaluation = evaluate_retrieval(index.pool, retriever, questions, show_progress=False)
    seeds = question_seeds(retriever, [q.question for q in questions])
    documents = index.documents()
    titles = {d.id: d.title for d in documents}
    questions, reordered = hop_order(questions, {d.id: d.text for d in documents}, hop_sources)
    result = breakdown(ppr_of(retriever).graph, titles, questions, evaluation.rankings, seeds, kinds, k=k, hub=hub)
    overall = evaluation.to_dict()
    return {"index": str(index_dir), "questions": str(questions_path), "split": split, "types": mode,
            "retriever": name, "n_questions": len(questions), "eval_s": round(timer.wall_s, 1),
            "overall": {key: overall[key] for key in (*(f"passage_recall@{n}" for n in KS), "mrr@10")},
            "typed_by_heuristic": sum(1 for q in questions if mode == "hotpot" and not rows[q.id].get("type")),
            "hop_order_from_sources": reordered,
            **result}


def markdown(result: Mapping[str, Any]) -> str:
    """The tables of a :func:`run` result."""
    k, lines = result["k"], []
    lines += [f"recall by type ({result['n_questions']} questions, {result['types']}):", "",
              f"| type | questions | recall@2 | recall@5 | recall@10 | gold | missed@{k} | no seed |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind, r in result["by_type"].items():
        lines.append(f"| {kind} | {r['questions']} | {r['recall@2']:.3f} | {r['recall@5']:.3f} | "
                     f"{r['recall@10']:.3f} | {r['gold']} | {r['missed']} | {r['fallback']} |")
    groups = [g for g in GROUPS if any(g in r["groups"] for r in result["by_type"].values())]
    lines += ["", f"missed gold passages at {k}, by why (a hub: an entity in over {result['hub']} passages):", "",
              "| type | missed | " + " | ".join(groups) + " |", "| --- | ---: |" + " ---: |" * len(groups)]
    for kind, r in result["by_type"].items():
        lines.append(f"| {kind} | {r['missed']} | " + " | ".join(str(r["groups"].get(g, 0)) for g in groups) + " |")
    if result["types"] == "hops":
        ordered = result.get("hop_order_from_sources", 0)
        source = "the position in gold_passage_ids" if not ordered else f"the decomposition of {ordered} questions" \
            + (", the gold order of the others" if ordered < result["n_questions"] else "")
        lines += ["", f"by hop ({source}); previous found = the hop before it is in the top {k}:",
                  "", "| type | hop | gold | missed | previous found | " + " | ".join(groups) + " |",
                  "| --- | ---: | ---: | ---: | ---: |" + " ---: |" * len(groups)]
        for r in result["by_hop"]:
            lines.append(f"| {r['type']} | {r['hop']} | {r['gold']} | {r.get('missed', 0)} | "
                         f"{r.get('previous_found', 0) if r['hop'] > 1 else '-'} | "
                         + " | ".join(str(r.get(g, 0)) for g in groups) + " |")
    names = band_names(k) + ["unranked"]
    lines += ["", "rank of the missed passages:", "", "| why | " + " | ".join(names) + " |",
              "| --- |" + " ---: |" * len(names)]
    for g in groups:
        lines.append(f"| {g} | " + " | ".join(str(result["rank_bands"].get(g, {}).get(n, 0)) for n in names) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    from pathlib import Path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("index")
    ap.add_argument("questions")
    ap.add_argument("--split")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--types", default="auto", choices=["auto", "hops", "field", "hotpot"])
    ap.add_argument("--k", type=int, default=5, help="the cut-off a gold passage is missed at (default 5)")
    ap.add_argument("--hub", type=int, default=HUB, help=f"an entity in more passages links nothing (default {HUB})")
    ap.add_argument("--hop-order", nargs="+", default=[], metavar="FILE",
                    help="MuSiQue files with question_decomposition: gold passages in hop order (hop_order)")
    ap.add_argument("--markdown", metavar="PATH", help="also write the tables here")
    add_json_argument(ap)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    report = Report("miss_map")
    report.results.update(run(args.index, args.questions, split=args.split, limit=args.limit, types=args.types,
                              k=args.k, hop_sources=args.hop_order, hub=args.hub))
    text = markdown(report.results)
    print(text, flush=True)
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")
    report.write(args.json_out, show=False)


if __name__ == "__main__":
    main()
