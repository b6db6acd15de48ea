"""The QA reader and its metrics: SQuAD EM/F1 over aliases, TPQ, TPER, and a real reader run."""
from __future__ import annotations

import numpy as np
import pytest

from sirerag.config import LLMConfig
from sirerag.errors import ConfigError
from sirerag.evaluation.qa import (
    ReaderResult,
    clean_answer,
    efficiency,
    evaluate_reader,
    exact_match,
    f1_score,
    tper,
)
from sirerag.retrievers.bm25 import BM25Retriever
from sirerag.types import Node, Pool


def test_exact_match_uses_squad_normalisation_and_aliases():
    assert exact_match("The Eiffel Tower.", ["eiffel tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    assert exact_match("NYC", ["New York City", "NYC"]) == 1.0  # any alias counts
    assert exact_match("", ["x"]) == 0.0


def test_f1_is_token_overlap_with_the_best_alias():
    # prediction "eiffel tower" vs gold "eiffel tower in paris": P = 2/2, R = 2/4, F1 = 2PR/(P+R) = 2/3
    assert f1_score("the Eiffel Tower", ["Eiffel Tower in Paris"]) == pytest.approx(2 / 3)
    # the best alias wins: the second one matches exactly
    assert f1_score("Paris", ["Eiffel Tower in Paris", "Paris"]) == 1.0
    assert f1_score("London", ["Paris"]) == 0.0
    # repeated tokens are counted as multisets: "a a b" vs "a b": common 2, P 2/3, R 1
    assert f1_score("x x y", ["x y"]) == pytest.approx(0.8)


def test_clean_answer_takes_the_first_line():
    assert clean_answer("  Answer: Paris.\nBecause the context says so") == "Paris."
    assert clean_answer("\n\nRome") == "Rome"


def test_tper_matches_the_paper_definition():
    # SiReRAG 1.2 s per query over a pool of 30,000; RAPTOR 1.0 s over 10,000
    assert tper(1.2, 30_000, 1.0, 10_000) == pytest.approx(0.4)
    a, b = (ReaderResult("r", 1, 0.0, 0.0, tpq, tpq, 0.0, 0, 0, 0.0, size, (), top_k=2)
            for tpq, size in ((2.0, 20), (1.0, 10)))
    assert efficiency(a, b).to_dict() == {"tpq_a": 2.0, "tpq_b": 1.0, "pool_a": 20, "pool_b": 10,
                                          "tper": pytest.approx(1.0)}
    with pytest.raises(ConfigError, match="tper"):
        tper(1.0, 10, 0.0, 10)


FACTS = [
    "The Harwick Bridge over the River Tame was designed by the engineer Margaret Lowe.",
    "Margaret Lowe was born in Elmford in 1889.",
    "The town of Elmford lies in Staffordshire.",
    "Basalt is a volcanic rock that forms from lava.",
    "The Okavango Delta is in Botswana.",
]
QUESTIONS = [
    {"id": "q1", "question": "Who designed the Harwick Bridge?", "answers": ["Margaret Lowe", "Lowe"]},
    {"id": "q2", "question": "In which country is the Okavango Delta?", "answers": ["Botswana"]},
    {"id": "q3", "question": "In what year was Margaret Lowe born?", "answers": ["1889"]},
]


@pytest.fixture(scope="module")
def pool_and_retriever():
    nodes = tuple(Node(id=f"n{i}", text=t, kind="leaf", tree="similarity", level=0, passages=(f"p{i}",))
                  for i, t in enumerate(FACTS))
    pool = Pool(entries=nodes, embeddings=np.eye(len(nodes), dtype=np.float32))
    return pool, BM25Retriever([n.id for n in nodes], [n.text for n in nodes])


@pytest.mark.server
@pytest.mark.slow
def test_reader_answers_from_retrieved_entries(pool_and_retriever, tmp_path):
    from _llm_server import server_url

    from sirerag.llm.factory import load_llm

    pool, retriever = pool_and_retriever
    llm = load_llm(f"openai:smollm2@{server_url()}", config=LLMConfig(), cache_dir=tmp_path)
    typed = evaluate_reader(pool, retriever, QUESTIONS, llm, top_k=2, show_progress=False)
    result = typed.to_dict()  # the JSON form `sirerag eval --reader --json` writes
    assert typed.predictions[0].id == "q1" and result["predictions"][0]["answers"] == list(typed.predictions[0].answers)
    assert result["n_questions"] == 3 and result["n_failed"] == 0 and result["n_cached"] == 0
    assert result["reader"] == "openai:smollm2" and result["pool_size"] == 5 and result["top_k"] == 2
    rows = result["predictions"]
    assert [r["id"] for r in rows] == ["q1", "q2", "q3"]
    assert result["em"] == pytest.approx(np.mean([r["em"] for r in rows]))
    assert result["f1"] == pytest.approx(np.mean([r["f1"] for r in rows]))
    assert result["f1"] >= 1 / 3  # SmolLM2-135M reads at least one of these easy questions right
    assert result["tpq"] == pytest.approx(result["retrieval_seconds"] + result["reading_seconds"])
    assert result["tpq"] > 0

    again = evaluate_reader(pool, retriever, QUESTIONS, llm, token_budget=12, show_progress=False).to_dict()
    assert again["token_budget"] == 12 and "top_k" not in again
    assert again["context_tokens"] <= 12 + 2  # entries joined by a blank line may add a token
    cached = evaluate_reader(pool, retriever, QUESTIONS, llm, top_k=2, show_progress=False).to_dict()
    assert cached["n_cached"] == 3 and [r["prediction"] for r in cached["predictions"]] == \
        [r["prediction"] for r in rows]

