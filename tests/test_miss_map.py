"""benchmarks/miss_map.py and miss_types.py: recall by question type and the missed gold passages grouped by why
(linked, bridged, named but not linked, extracted but not bridged, not extracted), on a hand-built graph with
known answers, question types and MuSiQue's hop order, and end to end on a small offline build whose figures agree
with `sirerag eval`."""
from __future__ import annotations

import json
import sys

import pytest
from _tiny_index import CHAIN, CHAIN_QUESTION, ROWS

from benchmarks import miss_map, miss_types
from sirerag.cli.main import main
from sirerag.core.types import Proposition
from sirerag.graph.build import build_graph
from sirerag.graph.linking import Bridge, Seeds
from sirerag.evaluation.retrieval import Question

PASSAGES = {  # passage id -> (title, the entities of its one proposition)
    "p1": ("Marta Kowalski", ("Marta Kowalski", "Zielonka")),
    "p2": ("Zielonka", ("Zielonka", "Biała Creek")),
    "p3": ("Biała Creek", ("Biała Creek", "Baltic Sea")),
    "p4": ("Okavango Delta", ("Okavango Delta", "Botswana")),
    "p5": ("Jan Nowak (writer)", ("Jan Nowak", "Gdańsk")),
    "x1": ("Vistula", ("Vistula", "Warsaw")), "x2": ("Danube", ("Danube", "Vienna")),
    "x3": ("Oder", ("Oder", "Wrocław")), "x4": ("Elbe", ("Elbe", "Dresden")), "x5": ("Rhine", ("Rhine", "Basel")),
}
QUESTION = "Which creek flows past the hometown of Marta Kowalski, whom Jan Nowak married?"


@pytest.fixture(scope="module")
def graph():
    props = [Proposition(id=f"f{i}", text=f"fact {i}", entities=ents, chunk_id=f"c{pid}", doc_id=pid, index=i)
             for i, (pid, (_, ents)) in enumerate(PASSAGES.items())]
    return build_graph(list(PASSAGES), props, titles=[t for t, _ in PASSAGES.values()])


def test_each_missed_passage_falls_in_the_first_group_that_holds(graph):
    marta, zielonka = graph.entity_node("Marta Kowalski"), graph.entity_node("Zielonka")
    seeds = Seeds(entities={marta: 1.0, zielonka: 0.5}, query_entities=[("Marta Kowalski", marta, 1.0)],
                  bridges=[Bridge(node=zielonka, hop=1, via=marta, text="fact 0", score=0.6)])
    gold = ("p1", "p2", "p3", "p4", "p5", "p9")  # p9 is no passage of the graph
    questions = [Question("q1", QUESTION, ("Biała Creek",), gold), Question("q2", "Where is Zielonka?", (), ("p2",))]
    rankings = {"q1": ("x1", "x2", "x3", "x4", "x5", "p1", "p2", "p3", "p4", "p5"),
                "q2": ("p2", "x1", "x2", "x3", "x4", "p1")}
    titles = {pid: title for pid, (title, _) in PASSAGES.items()}
    result = miss_map.breakdown(graph, titles, questions, rankings, [seeds, Seeds()], {"q1": "chain", "q2": "one"})
    misses = {m["passage"]: m for m in result["misses"]}
    assert {p: m["group"] for p, m in misses.items()} == {
        "p1": "linked", "p2": "bridged", "p3": "extracted, not bridged", "p4": "not extracted",
        "p5": "named, not linked", "p9": "not in graph"}
    assert [misses[p]["rank"] for p in gold] == [6, 7, 8, 9, 10, None]
    assert misses["p1"]["linked"] == [["Marta Kowalski", 1]] and misses["p2"]["bridged"] == [["Zielonka", 1, 2]]
    assert misses["p3"]["shared"] == [["Biała Creek", 2]]  # shared with gold p2, in two passages
    assert misses["p5"]["named"] == ["Jan Nowak"]  # the title node "Jan Nowak (writer)" is not in the question
    assert [misses[p]["previous_found"] for p in gold] == [None, False, False, False, False, False]
    chain, one = result["by_type"]["chain"], result["by_type"]["one"]
    assert (chain["questions"], chain["gold"], chain["missed"], chain["fallback"]) == (1, 6, 6, 0)
    assert chain["recall@5"] == 0.0 and chain["recall@10"] == pytest.approx(5 / 6, abs=1e-4)
    assert (one["missed"], one["recall@2"], one["fallback"]) == (0, 1.0, 1)
    assert result["questions"] == [{"id": "q1", "type": "chain", "seeds": 1, "bridges": 1, "recall@5": 0.0},
                                   {"id": "q2", "type": "one", "seeds": 0, "bridges": 0, "recall@5": 1.0}]
    assert result["rank_bands"] == {"linked": {"6-10": 1}, "bridged": {"6-10": 1},
                                    "extracted, not bridged": {"6-10": 1},
                                    "not extracted": {"6-10": 1}, "named, not linked": {"6-10": 1},
                                    "not in graph": {"unranked": 1}}
    assert [(r["hop"], r["gold"], r["missed"]) for r in result["by_hop"] if r["type"] == "chain"] == \
        [(hop, 1, 1) for hop in range(1, 7)]
    # an entity in more passages than ``hub`` links nothing: Zielonka and Biała Creek (two passages each) are hubs
    hubs = miss_map.breakdown(graph, titles, questions, rankings, [seeds, Seeds()], {"q1": "chain", "q2": "one"}, hub=1)
    assert [m["group"] for m in hubs["misses"]] == ["linked", "hub only", "hub only", "not extracted",
                                                   "named, not linked", "not in graph"]


def test_question_types_from_hops_the_type_field_or_hotpots_heuristic():
    musique = {"a": {"question": "q", "hops": 3}, "b": {"question": "q", "hops": 2}}
    assert miss_types.question_types(musique) == ({"a": "3 hops", "b": "2 hops"}, "hops")
    wiki = {"a": {"question": "q", "type": "inference"}, "b": {"question": "q", "type": "bridge_comparison"}}
    assert miss_types.question_types(wiki) == ({"a": "inference", "b": "bridge_comparison"}, "field")
    hotpot = {"a": {"question": "Who was born first, Aleksandr Ivanovsky or Arthur Lubin?"},
              "b": {"question": "Are Daryl Hall and Gerry Marsden both musicians?"},
              "c": {"question": "What government position was held by the woman who portrayed Corliss Archer?"},
              "d": {"question": "Who is older, Jed Hoyer or John William Henry II?", "type": "bridge"}}
    assert miss_types.question_types(hotpot) == (
        {"a": "comparison", "b": "comparison", "c": "bridge", "d": "bridge"}, "hotpot")  # the field wins
    assert [miss_map.band(r) for r in (6, 10, 11, 50, 51, None)] == \
        ["6-10", "6-10", "11-20", "21-50", "51+", "unranked"]
    assert miss_map.band_names(2) == ["3-10", "11-20", "21-50", "51+"] and miss_map.band(3, k=2) == "3-10"
    assert miss_map.band_names(20) == ["21-50", "51+"] and miss_map.band(21, k=20) == "21-50"


def test_hop_order_follows_musiques_decomposition_matched_by_paragraph_text(tmp_path):
    texts = {"a": "First  paragraph.", "b": "Second paragraph.", "c": "Third paragraph."}
    source = {"id": "3hop1__1_2_3", "question_decomposition": [{"paragraph_support_idx": i} for i in (2, 0, 1)],
              "paragraphs": [{"paragraph_text": t}
                             for t in ("First paragraph.", "Second paragraph.", "Third paragraph.")]}
    (tmp_path / "m.json").write_text(json.dumps([source]), encoding="utf-8")
    unanswerable = {**source, "id": "unknown", "question_decomposition": [{"paragraph_support_idx": None}]}
    (tmp_path / "m.jsonl").write_text(json.dumps({**source, "id": "other"}) + "\n" + json.dumps(unanswerable) + "\n",
                                      encoding="utf-8")
    questions = [Question("3hop1__1_2_3", "q?", (), ("a", "b", "c")), Question("unknown", "q?", (), ("b", "a")),
                 Question("other", "q?", (), ("a", "b"))]  # its source names a third passage: kept as given
    ordered, done = miss_types.hop_order(questions, texts, [str(tmp_path / "m.json"), str(tmp_path / "m.jsonl")])
    assert [q.gold_passage_ids for q in ordered] == [("c", "a", "b"), ("b", "a"), ("a", "b")] and done == 1


CORPUS = [*CHAIN, (ROWS[2]["title"], ROWS[2]["text"])]  # the chain and the Okavango Delta


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("missmap")
    rows = [{"id": f"d{i}", "title": t, "text": x} for i, (t, x) in enumerate(CORPUS)]
    (root / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    questions = [
        {"id": "q1", "question": CHAIN_QUESTION, "answers": ["x"],
         "gold_passage_ids": ["d0", "d1"], "hops": 2, "split": "dev"},
        {"id": "q2", "question": "Where was Jan Nowak born, and where is the Okavango Delta?", "answers": ["Gdańsk"],
         "gold_passage_ids": ["d4", "d6", "gone"], "hops": 3, "split": "dev"},
        {"id": "q3", "question": "Which river flows through Vienna?", "answers": ["Danube"],
         "gold_passage_ids": ["d3", "d2"], "hops": 2, "split": "train"}]
    (root / "q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    assert main(["build", str(root / "c.jsonl"), "--out", str(root / "index"), "--trees", "none", "--chunking",
                 "passage", "--graph", "--quiet"]) == 0
    return root


def test_the_map_of_a_small_build_agrees_with_sirerag_eval(bench, monkeypatch, capsys):
    out = bench / "map.json"
    source = {"id": "q1", "paragraphs": [{"paragraph_text": text} for _, text in CORPUS[:2]],
              "question_decomposition": [{"paragraph_support_idx": 1}, {"paragraph_support_idx": 0}]}
    (bench / "musique.json").write_text(json.dumps([source]), encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["miss_map", str(bench / "index"), str(bench / "q.jsonl"), "--split", "dev",
                                      "--json", str(out), "--markdown", str(bench / "map.md"),
                                      "--hop-order", str(bench / "musique.json")])
    miss_map.main()
    result = json.loads(out.read_text())["results"]
    assert main(["eval", str(bench / "index"), "--questions", str(bench / "q.jsonl"), "--split", "dev",
                 "--json", str(bench / "eval.json"), "--quiet"]) == 0
    evaluated = json.loads((bench / "eval.json").read_text())
    assert result["retriever"] == evaluated["retriever"] == "ppr" and result["types"] == "hops"
    assert set(result["by_type"]) == {"2 hops", "3 hops"} and result["n_questions"] == 2
    assert result["hop_order_from_sources"] == 1  # q1, matched by the texts of the index's passages
    for n in (2, 5, 10):
        assert result["overall"][f"passage_recall@{n}"] == pytest.approx(evaluated[f"passage_recall@{n}"])
        assert sum(r[f"recall@{n}"] for r in result["by_type"].values()) / 2 == pytest.approx(
            evaluated[f"passage_recall@{n}"], abs=1e-4)
    gone = [m for m in result["misses"] if m["passage"] == "gone"]
    assert gone == [{"question": "q2", "type": "3 hops", "hop": 3, "of": 3, "passage": "gone", "title": "",
                     "rank": None, "previous_found": gone[0]["previous_found"], "group": "not in graph"}]
    assert all(m["rank"] is None or m["rank"] > 5 for m in result["misses"])
    assert sum(r["missed"] for r in result["by_type"].values()) == len(result["misses"])
    table = (bench / "map.md").read_text()
    assert "| 3 hops | 3 | 1 | 1 |" in table and table in capsys.readouterr().out
