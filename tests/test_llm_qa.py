"""The QA reader and its metrics: SQuAD EM/F1 over aliases, TPQ, TPER, and the reader's plumbing
(prompts, answer cleaning, scoring, failures, the call cache) against a scripted HTTP server.

The reader's quality with a real model is a benchmark, not a test: see docs/llm.md.
"""
from __future__ import annotations

import numpy as np
import pytest

from sirerag.core.config import LLMConfig
from sirerag.core.errors import ConfigError
from sirerag.evaluation.qa import ReaderResult, clean_answer, efficiency, evaluate_reader, exact_match, f1_score, tper
from sirerag.retrievers.base import Hit
from sirerag.core.types import Node, Pool


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
    {"id": "q4", "question": "Where is Elmford? [always:400]", "answers": ["Staffordshire"]},
]
#: what the retriever ranks first for each question (entry numbers)
RANKING = {"q1": [0, 1, 2], "q2": [4, 3, 0], "q3": [1, 0, 2], "q4": [2, 1, 0]}
#: the scripted reader's replies, by question: raw text as a model might write it
REPLIES = {
    "Who designed the Harwick Bridge?": "Answer: Margaret Lowe.\nThe context says the engineer designed it.",
    "In which country is the Okavango Delta?": "\n\nBotswana, in Africa",
    "In what year was Margaret Lowe born?": "Elmford",
}
SYSTEM = "You answer questions using the given context."


class FixedRetriever:
    """Ranks the entries in the order of RANKING for each question."""

    def search(self, query: str, k: int = 10) -> list[Hit]:
        qid = next(q["id"] for q in QUESTIONS if q["question"] == query)
        return [Hit(entry_id=f"n{i}", score=1.0 / (r + 1)) for r, i in enumerate(RANKING[qid])][:k]


def reply(body: dict) -> str:
    question = body["messages"][-1]["content"].split("Question: ")[1].split("\n")[0]
    return REPLIES[question]


@pytest.fixture(scope="module")
def pool():
    nodes = tuple(Node(id=f"n{i}", text=t, kind="leaf", tree="similarity", level=0, passages=(f"p{i}",))
                  for i, t in enumerate(FACTS))
    return Pool(entries=nodes, embeddings=np.eye(len(nodes), dtype=np.float32))


def test_reader_plumbing_with_a_scripted_server(pool, tmp_path):
    from _llm_server import FlakyServer

    from sirerag.llm.factory import load_llm

    with FlakyServer(reply=reply) as server:
        llm = load_llm(f"openai:reader@{server.url}", config=LLMConfig(max_retries=0), cache_dir=tmp_path)
        typed = evaluate_reader(pool, FixedRetriever(), QUESTIONS, llm, top_k=2, show_progress=False)
        result = typed.to_dict()  # the JSON form `sirerag eval --reader --json` writes
        assert typed.predictions[0].id == "q1" and typed.n_questions == 4

        # the prompt: system message, the top-2 entries in rank order, the question, one request each
        sent = {b["messages"][-1]["content"].split("Question: ")[1].split("\n")[0]: b for b in server.bodies}
        assert len(server.bodies) == 4 and len(sent) == 4
        body = sent["Who designed the Harwick Bridge?"]
        assert body["model"] == "reader" and body["temperature"] == 0.0 and body["max_tokens"] == 32
        assert body["messages"] == [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Context:\n{FACTS[0]}\n\n{FACTS[1]}\n\nQuestion: Who designed the "
                                        "Harwick Bridge?\nAnswer the question in as few words as possible."}]
        assert f"Context:\n{FACTS[4]}\n\n{FACTS[3]}\n\nQuestion" in \
            sent["In which country is the Okavango Delta?"]["messages"][-1]["content"]

        # answers cleaned (first line, no "Answer:"), scored per question, failures scored 0
        rows = result["predictions"]
        assert [r["id"] for r in rows] == ["q1", "q2", "q3", "q4"]
        assert [r["prediction"] for r in rows] == ["Margaret Lowe.", "Botswana, in Africa", "Elmford", ""]
        assert [r["em"] for r in rows] == [1.0, 0.0, 0.0, 0.0]
        # q2: "botswana in africa" against "botswana": P 1/3, R 1, F1 = 2PR/(P+R) = 1/2
        assert [r["f1"] for r in rows] == [1.0, pytest.approx(0.5), 0.0, 0.0]
        assert "HTTP 400" in rows[3]["error"] and all("error" not in r for r in rows[:3])
        assert result["em"] == pytest.approx(1 / 4) and result["f1"] == pytest.approx(1.5 / 4)
        assert (result["n_questions"], result["n_failed"], result["n_cached"]) == (4, 1, 0)
        assert result["reader"] == "openai:reader" and result["pool_size"] == 5 and result["top_k"] == 2
        assert result["tpq"] == pytest.approx(result["retrieval_seconds"] + result["reading_seconds"])

        # a token budget instead of top_k: the first entry, cut at 12 tokens
        again = evaluate_reader(pool, FixedRetriever(), QUESTIONS[:1], llm, token_budget=12,
                                show_progress=False).to_dict()
        assert again["token_budget"] == 12 and "top_k" not in again
        context = server.bodies[-1]["messages"][-1]["content"].split("Context:\n")[1].split("\n\nQuestion")[0]
        assert FACTS[0].startswith(context) and len(context) < len(FACTS[0])
        assert 10 <= again["context_tokens"] <= 12

        # the call cache answers what was answered; the failure is asked again, never stored
        sent_before = len(server.bodies)
        cached = evaluate_reader(pool, FixedRetriever(), QUESTIONS, llm, top_k=2, show_progress=False).to_dict()
        assert (cached["n_cached"], cached["n_failed"]) == (3, 1)
        assert [r["prediction"] for r in cached["predictions"]] == [r["prediction"] for r in rows]
        assert len(server.bodies) == sent_before + 1 and server.seen[body["messages"][-1]["content"]] == 1
