"""nDCG/MRR arithmetic, TREC runs checked with ranx, ``eval --beir`` and ``--run``."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from sirerag.cli.main import main
from sirerag.core.errors import InputError
from sirerag.evaluation.metrics import ndcg, passage_recall, reciprocal_rank
from sirerag.evaluation.retrieval import Question, evaluate_retrieval, load_beir_questions, load_questions
from sirerag.evaluation.trec import write_qrels, write_run
from sirerag.retrievers.base import Hit
from sirerag.core.types import Node, Pool

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
FIX = ROOT / "tests" / "data" / "datasets"


def test_ndcg_and_mrr_on_a_constructed_ranking():
    ranked = ["a", "x", "b", "y", "c"]
    gold = ["a", "b", "c", "d"]
    dcg = 1 + 1 / math.log2(4) + 1 / math.log2(6)  # gold at ranks 1, 3, 5
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(5)  # 4 gold at ranks 1..4
    assert ndcg(ranked, gold, 10) == pytest.approx(dcg / ideal, abs=1e-12)
    assert ndcg(ranked, gold, 10) == pytest.approx(0.7365898, abs=1e-6)
    assert ndcg(ranked, gold, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)), abs=1e-12)  # ideal cut at k too
    assert ndcg(["a"], ["a"], 10) == 1.0 and ndcg(["x"], ["a"], 10) == 0.0
    assert reciprocal_rank(["x", "y", "a"], ["a", "b"], 10) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "y", "a"], ["a"], 2) == 0.0
    assert passage_recall(ranked, gold, 3) == 0.5


def _pool() -> Pool:
    nodes = (
        Node(id="l1", text="Paris is the capital of France.", kind="leaf", tree="similarity", level=0, passages=("p1",)),
        Node(id="l2", text="Berlin is in Germany.", kind="leaf", tree="similarity", level=0, passages=("p2",)),
        Node(id="s1", text="Paris and Berlin.", kind="summary", tree="similarity", level=1, children=("l1", "l2"),
             passages=("p1", "p2")),
        Node(id="l3", text="Rome is old.", kind="leaf", tree="similarity", level=0, passages=("p3",)),
    )
    return Pool(entries=nodes, embeddings=np.eye(4, dtype=np.float32))


class _Fixed:
    name = "fixed"

    def __init__(self, ranking):
        self.ranking = ranking

    def search(self, query, k=10):
        return [Hit(e, 1.0) for e in self.ranking[query][:k]]


@pytest.mark.slow  # importing ranx (numba) costs ~15 s of CPU
def test_result_dataclass_run_file_and_ranx_agree(tmp_path):
    ranx = pytest.importorskip("ranx")
    questions = [Question("q1", "a", ("Paris",), ("p2", "p3")), Question("q2", "b", (), ("p1",)),
                 Question("q3", "c", ("no",), ("p3",))]
    retriever = _Fixed({"a": ["s1", "l3"], "b": ["l3", "l2", "l1"], "c": ["l1", "l2"]})
    result = evaluate_retrieval(_pool(), retriever, questions, ks=(1, 2), budgets=(64,), show_progress=False)
    # the summary's two passages share its rank 1; first appearance wins
    assert result.rankings["q1"] == ("p1", "p2", "p3")
    assert result.passage_recall == {1: pytest.approx((0 + 0 + 0) / 3), 2: pytest.approx((0.5 + 0 + 0) / 3)}
    assert result.mrr[10] == pytest.approx((1 / 2 + 1 / 3 + 0) / 3)
    assert result.no_answer_excluded == 1 and result.yes_no_excluded == 1 and result.answer_recall_questions == 1
    assert list(result.to_dict())[:4] == ["retriever", "n_questions", "passage_recall@1", "passage_recall@2"]
    with pytest.raises(AttributeError, match="cannot assign"):
        result.n_questions = 0  # frozen
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels.trec"
    assert write_run(run, result.rankings) == 3 + 3 + 2
    write_qrels(qrels, {q.id: q.gold_passage_ids for q in questions})
    assert run.read_text().splitlines()[0] == "q1 Q0 p1 1 3 sirerag"
    scores = ranx.evaluate(ranx.Qrels.from_file(str(qrels), kind="trec"), ranx.Run.from_file(str(run), kind="trec"),
                           ["recall@2", "ndcg@10", "mrr@10"])
    assert scores["recall@2"] == pytest.approx(result.passage_recall[2], abs=1e-9)
    assert scores["ndcg@10"] == pytest.approx(result.ndcg[10], abs=1e-9)
    assert scores["mrr@10"] == pytest.approx(result.mrr[10], abs=1e-9)


def test_run_refuses_ids_with_white_space(tmp_path):
    with pytest.raises(InputError, match=r"question id 'q 1' cannot be written to a TREC file"):
        write_run(tmp_path / "r.trec", {"q 1": ["p1"]})
    assert not (tmp_path / "r.trec").exists()


def test_load_beir_questions_keeps_beir_ids():
    questions = load_beir_questions(FIX / "beir")
    assert [q.id for q in questions] == ["q1", "q2", "q4", "q5"]  # q4's judged documents are checked by eval
    assert questions[0].gold_passage_ids == ("d4", "d2") and questions[0].answers == ()
    with pytest.raises(InputError, match=r"qrels file not found: .*train\.tsv"):
        load_beir_questions(FIX / "beir", split="train")


@pytest.fixture(scope="module")
def leaves(data_leaves):
    """data/ indexed as passages only (MiniLM, no trees): the session's shared index."""
    return data_leaves[0]


@pytest.mark.slow
def test_ranx_reproduces_recall_on_data(leaves, tmp_path, capsys):
    ranx = pytest.importorskip("ranx")
    out, run = tmp_path / "dense.json", tmp_path / "dense.trec"
    assert main(["eval", str(leaves), "--questions", str(DATA / "questions.jsonl"), "--json", str(out),
                 "--run", str(run), "--quiet"]) == 0
    ours = json.loads(out.read_text())
    qrels = tmp_path / "qrels.trec"
    write_qrels(qrels, {q.id: q.gold_passage_ids for q in load_questions(DATA / "questions.jsonl")})
    metrics = [f"recall@{k}" for k in (2, 5, 10, 20)] + ["ndcg@10", "mrr@10"]
    theirs = ranx.evaluate(ranx.Qrels.from_file(str(qrels), kind="trec"), ranx.Run.from_file(str(run), kind="trec"),
                           metrics)
    for k in (2, 5, 10, 20):
        assert abs(theirs[f"recall@{k}"] - ours[f"passage_recall@{k}"]) <= 1e-9
    assert abs(theirs["ndcg@10"] - ours["ndcg@10"]) <= 1e-9 and abs(theirs["mrr@10"] - ours["mrr@10"]) <= 1e-9
    for k in range(1, 21):
        assert abs(ranx.evaluate(ranx.Qrels.from_file(str(qrels), kind="trec"),
                                 ranx.Run.from_file(str(run), kind="trec"), f"recall@{k}")
                   - ours["passage_recall_curve"][k - 1]) <= 1e-9
    # the same questions through a BEIR folder give the same metrics
    beir = tmp_path / "beir"
    assert main(["data", "convert", "sirerag", str(DATA / "corpus.jsonl"), str(DATA / "questions.jsonl"),
                 "--out", str(beir), "--to", "beir"]) == 0
    out_beir = tmp_path / "beir.json"
    assert main(["eval", str(leaves), "--beir", str(beir), "--split", "dev", "--json", str(out_beir), "--quiet"]) == 0
    via_beir = json.loads(out_beir.read_text())
    for key in ("passage_recall@5", "ndcg@10", "mrr@10", "answer_recall@512"):
        assert via_beir[key] == ours[key]
    printed = capsys.readouterr().out
    assert "ndcg@10" in printed and "mrr@10" in printed and "TREC run: " in printed


@pytest.mark.slow
def test_eval_beir_without_answers_skips_answer_recall(leaves, tmp_path, capsys):
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "qrels").mkdir()
    rows = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines()][:5]
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": r["id"], "text": r["question"]}) + "\n"
                                                for r in rows))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{r['id']}\t{pid}\t1\n" for r in rows for pid in r["gold_passage_ids"]))
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": r["id"], "title": r["title"], "text": r["text"]}) + "\n"
                                               for r in map(json.loads, (DATA / "corpus.jsonl").read_text().splitlines())))
    out = tmp_path / "r.json"
    assert main(["eval", str(leaves), "--beir", str(beir), "--json", str(out), "--quiet"]) == 0
    result = json.loads(out.read_text())
    assert result["n_questions"] == 5 and result["answer_recall@512"] is None and result["no_answer_excluded"] == 5
    assert "answer recall skipped: no question has gold answers" in capsys.readouterr().out
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\tnot-a-passage\t1\n")
    (beir / "queries.jsonl").write_text('{"_id": "q", "text": "x"}\n')
    assert main(["eval", str(leaves), "--beir", str(beir)]) == 1
    assert "none of the judged documents is a passage of" in capsys.readouterr().err
