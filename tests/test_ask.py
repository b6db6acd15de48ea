"""``sirerag ask`` and ``Index.ask``: retrieve, read with the QA reader's prompt under a token budget, print the
answer with numbered sources (title, passage id); ``--json``; a reader that fails or a bad setting is one clear
error. The reader is a scripted chat-completions server (``FlakyServer(reply=...)``), never a real model."""
from __future__ import annotations

import json

import pytest
from _llm_server import FlakyServer
from _tiny_index import QUESTION, build_tiny_index

import sirerag
from sirerag.cli.main import main
from sirerag.core.config import LLMConfig
from sirerag.core.errors import ConfigError
from sirerag.llm.base import LLMCallError
from sirerag.llm.factory import load_llm
from sirerag.llm.prompts import QA_READER


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return build_tiny_index(tmp_path_factory.mktemp("ask"))


def reply(body: dict) -> str:
    context = body["messages"][-1]["content"].split("Question:")[0]
    return "Answer: Margaret Lowe\nbecause the context says so" if "Margaret Lowe" in context else "unknown"


def test_ask_prints_the_answer_with_numbered_sources(index_dir, capsys):
    with FlakyServer(reply=reply) as server:
        code = main(["ask", str(index_dir), QUESTION, "--llm", f"openai:reader@{server.url}", "-k", "2",
                     "--retriever", "bm25"])
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith("Margaret Lowe\n\nsources:\n  [1] Harwick Bridge (passage harwick)\n")
    assert len(server.bodies) == 1
    body = server.bodies[0]
    assert body["messages"][0] == {"role": "system", "content": QA_READER.system}  # the QA reader's prompt
    user = body["messages"][-1]["content"]
    assert user.startswith("Context:\nHarwick Bridge\nThe Harwick Bridge was designed by Margaret Lowe in 1901.")
    assert user.endswith(f"Question: {QUESTION}\nAnswer the question in as few words as possible.")
    assert body["max_tokens"] == 64 and body["temperature"] == 0.0


def test_ask_json_and_the_token_budget(index_dir, capsys):
    with FlakyServer(reply=reply) as server:
        assert main(["ask", str(index_dir), QUESTION, "--llm", f"openai:reader@{server.url}", "-k", "3",
                     "--retriever", "bm25", "--token-budget", "5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    # a 5-token budget: only the first entry, cut at the budget, so the reader never saw the designer
    assert result["answer"] == "unknown" and result["context_tokens"] == 5
    assert [(s["n"], s["title"], s["passages"]) for s in result["sources"]] == [(1, "Harwick Bridge", ["harwick"])]
    assert result["llm"] == "openai:reader" and result["question"] == QUESTION
    context = server.bodies[0]["messages"][-1]["content"].split("\n\nQuestion:")[0]
    assert context == "Context:\nHarwick Bridge\nThe"  # the first 5 tokens of the entry


def test_index_ask_takes_a_loaded_llm_and_reads_in_rank_order(index_dir):
    with FlakyServer(reply=reply) as server, sirerag.Index.load(index_dir) as index:
        llm = load_llm(f"openai:reader@{server.url}", config=LLMConfig(max_retries=0))
        answer = index.ask("Where is the Okavango Delta? Elm river?", llm, k=3, retriever="bm25")
        assert answer.text == "unknown"
        assert [s.passages[0] for s in answer.sources] == \
            [r.passages[0] for r in index.search("Where is the Okavango Delta? Elm river?", k=3, retriever="bm25")]
        assert str(answer).startswith("unknown\n\nsources:\n  [1] ")


def test_a_failing_reader_and_bad_settings_are_clear_errors(index_dir, capsys):
    with FlakyServer() as server, sirerag.Index.load(index_dir) as index:
        llm = load_llm(f"openai:reader@{server.url}", config=LLMConfig(max_retries=0))
        with pytest.raises(LLMCallError, match="HTTP 500"):
            index.ask(f"{QUESTION} [always:500]", llm, retriever="bm25")
        with pytest.raises(ConfigError, match="token_budget must be an integer >= 1"):
            index.ask(QUESTION, llm, retriever="bm25", token_budget=0)
    assert main(["ask", str(index_dir), QUESTION, "--llm", "gpt4"]) == 1
    assert "llm spec must look like openai:MODEL" in capsys.readouterr().err
    assert main(["ask", str(index_dir), " ", "--llm", "openai:m@http://127.0.0.1:9/v1"]) == 1
    assert "query must be a question or keywords" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="^2$"):  # argparse's usage error
        main(["ask", str(index_dir), QUESTION])  # --llm is required
    assert "the following arguments are required: --llm" in capsys.readouterr().err


def test_a_reader_cache_inside_the_index_is_refused_before_any_work(index_dir, capsys):
    bm25_files = sorted(p.name for p in (index_dir / "bm25").iterdir())
    assert main(["ask", str(index_dir), QUESTION, "--llm", "openai:m@http://127.0.0.1:9/v1",
                 "--reader-cache", str(index_dir / "bm25")]) == 1
    assert "--reader-cache" in capsys.readouterr().err
    assert sorted(p.name for p in (index_dir / "bm25").iterdir()) == bm25_files  # nothing written there
    with pytest.raises(ConfigError, match="--reader-cache .* is an index folder"):
        sirerag.Index.load(index_dir).ask(QUESTION, "openai:m@http://127.0.0.1:9/v1", cache_dir=index_dir)
