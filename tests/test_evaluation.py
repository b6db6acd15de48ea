"""Evaluation metrics: SQuAD normalisation, entries mapped to passages, the token-budget context builder,
retrieval metrics, question files whose errors name the line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sirerag.core.errors import InputError
from sirerag.evaluation.retrieval import (
    ContextBuilder,
    Question,
    evaluate_retrieval,
    load_questions,
    passage_ranking,
    passage_recall,
)
from sirerag.evaluation.text import contains_answer, is_yes_no, normalize_answer
from sirerag.retrievers.base import Hit
from sirerag.text.tokens import count_tokens
from sirerag.core.types import Node, Pool


def test_squad_normalisation_and_whole_word_match():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple a day") == "apple day"
    assert contains_answer("It was built in 1889 by Gustave Eiffel.", ["gustave eiffel"])
    assert not contains_answer("In 18890 nothing happened.", ["1889"])  # whole words only
    assert contains_answer("...", ["nothing", "..."]) is False  # an answer that normalises to '' never matches
    assert is_yes_no(["Yes"]) and not is_yes_no(["Yesterday"])


def _pool() -> Pool:
    nodes = (
        Node(id="l1", text="Paris is the capital of France.", kind="leaf", tree="similarity", level=0, passages=("p1",)),
        Node(id="l2", text="Berlin is in Germany.", kind="leaf", tree="similarity", level=0, passages=("p2",)),
        Node(id="s1", text="European capitals: Paris and Berlin.", kind="summary", tree="similarity", level=1,
             children=("l1", "l2"), passages=("p1", "p2")),
        Node(id="l3", text="Rome is old.", kind="leaf", tree="similarity", level=0, passages=("p3",)),
    )
    return Pool(entries=nodes, embeddings=np.eye(4, dtype=np.float32))


def test_passage_ranking_maps_entries_to_first_seen_passages():
    pool = _pool()
    ranked = passage_ranking([Hit("s1", 1.0), Hit("l3", 0.5), Hit("l1", 0.4)], pool)
    assert ranked == ["p1", "p2", "p3"]
    assert passage_recall(ranked, ["p2", "p3"], 2) == 0.5
    assert passage_recall(ranked, ["p2", "p3"], 3) == 1.0


def test_context_builder_respects_token_budget_exactly():
    pool = _pool()
    builder = ContextBuilder(pool)
    first = count_tokens(pool.get("l1").text)
    text = builder.context([Hit("l1", 1), Hit("l2", 1)], budget=first + 2)
    assert text.startswith("Paris is the capital of France.")
    assert count_tokens(text.split("\n\n")[1]) == 2  # the second entry is cut at the budget


class _ListRetriever:
    name = "fixed"

    def __init__(self, ranking):
        self.ranking = ranking

    def search(self, query, k=10):
        return [Hit(e, 1.0 / (i + 1)) for i, e in enumerate(self.ranking[query][:k])]


def test_evaluate_retrieval_metrics():
    pool = _pool()
    questions = [
        Question("q1", "capital of france", ("Paris",), ("p1",)),
        Question("q2", "is rome old", ("yes",), ("p3",)),
        Question("q3", "where is berlin", ("Germany",), ("p2", "p3")),
    ]
    retriever = _ListRetriever({"capital of france": ["l1", "l2"], "is rome old": ["l3"],
                                "where is berlin": ["l3", "l2"]})
    result = evaluate_retrieval(pool, retriever, questions, ks=(1, 2), budgets=(4, 64), show_progress=False).to_dict()
    assert result["passage_recall@1"] == pytest.approx((1 + 1 + 0.5) / 3, abs=1e-4)
    assert result["passage_recall@2"] == pytest.approx(1.0)
    assert result["yes_no_excluded"] == 1 and result["answer_recall_questions"] == 2
    assert result["answer_recall@64"] == 1.0
    assert result["answer_recall@4"] == 0.5  # 'Germany' is beyond 4 tokens of "Rome is old."
    # recall at every k = 1..20 for the plots, whatever ks were asked for
    curve = result["passage_recall_curve"]
    assert len(curve) == 20 and curve[0] == result["passage_recall@1"] and curve[1:] == [1.0] * 19


def test_load_questions_errors_name_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "x", "answers": ["a"], "gold_passage_ids": ["p"], "split": "dev"}) + "\n"
                    + json.dumps({"question": "y", "answers": "a", "gold_passage_ids": []}) + "\n")
    with pytest.raises(InputError, match=r"q\.jsonl: question row 2: field 'answers' must be a list"):
        load_questions(path)
    assert len(load_questions(path, limit=1)) == 1
    path.write_text(path.read_text().splitlines()[0] + "\n")
    with pytest.raises(InputError, match="no questions with split='train'"):
        load_questions(path, split="train")
