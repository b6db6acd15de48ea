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


#: a story told in order, split into chunks of one sentence each: which came first decides the answer
STORY = ["Mary went to the kitchen.", "Mary picked up the apple there.", "Mary travelled to the garden.",
         "Mary dropped the apple in the garden.", "John moved to the hallway."]


@pytest.fixture(scope="module")
def story_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("story")
    from sirerag.core.types import Document

    rows = [Document(id="story", text=" ".join(STORY)),
            Document(id="other", title="Other", text="The apple is a fruit that grows on trees.")]
    sirerag.Index.build(rows, root / "index", trees="none", chunking={"max_tokens": 8}, show_progress=False).close()
    return root / "index"


def _context(body: dict) -> str:
    return body["messages"][-1]["content"].split("Context:\n", 1)[1].split("\n\nQuestion:")[0]


def test_document_order_reads_the_same_entries_grouped_by_document_in_story_order(story_index):
    question = "Where is the apple?"
    with FlakyServer(reply=lambda body: "garden") as server, sirerag.Index.load(story_index) as index:
        chunks = {c.id: c for c in index.loaded.chunks()}
        assert [c.text for c in chunks.values() if c.doc_id == "story"] == STORY  # one chunk per sentence
        by_rank = index.ask(question, f"openai:reader@{server.url}", k=6, retriever="dense")
        by_story = index.ask(question, f"openai:reader@{server.url}", k=6, retriever="dense", order="document")
        rank_ids = [s.entry_id for s in by_rank.sources]
        story_ids = [s.entry_id for s in by_story.sources]
        assert sorted(rank_ids) == sorted(story_ids) and len(story_ids) == 6  # the same entries...
        places = [(0 if chunks[i].doc_id == "story" else 1, chunks[i].index) for i in story_ids]
        assert places == sorted(places)  # ...grouped by document in corpus order, each in its place
        assert rank_ids != story_ids  # the search's ranking is not the story's order here
        told = [chunks[i].text for i in story_ids if chunks[i].doc_id == "story"]
        assert _context(server.bodies[1]).startswith("\n\n".join(told))
        assert _context(server.bodies[0]).startswith(by_rank.sources[0].text)
        with pytest.raises(ConfigError, match="order must be 'rank' or 'document', got 'time'"):
            index.ask(question, f"openai:reader@{server.url}", order="time")
        assert len(server.bodies) == 2  # the bad order was refused before any call


def test_document_order_puts_entries_that_span_passages_last_in_rank_order():
    from sirerag.answers import SearchResult, document_order

    def result(entry_id: str, kind: str = "leaf") -> SearchResult:
        return SearchResult(entry_id, 1.0, entry_id, "", "similarity", kind, 0, ("d",))

    results = [result("s1", "summary"), result("b0"), result("a3"), result("agg", "aggregate"), result("a1"),
               result("unknown")]
    positions = {"a1": (0, 1), "a3": (0, 3), "b0": (1, 0)}
    assert [results[i].entry_id for i in document_order(results, positions)] == \
        ["a1", "a3", "b0", "s1", "agg", "unknown"]


def test_ask_order_on_the_command_line(story_index, capsys):
    with FlakyServer(reply=lambda body: "garden") as server:
        assert main(["ask", str(story_index), "Where is the apple?", "--llm", f"openai:reader@{server.url}",
                     "--retriever", "bm25", "-k", "3", "--order", "document", "--json"]) == 0
    sources = json.loads(capsys.readouterr().out)["sources"]
    with sirerag.Index.load(story_index) as index:
        chunks = {c.id: c for c in index.loaded.chunks()}
    places = [(0 if chunks[s["id"]].doc_id == "story" else 1, chunks[s["id"]].index) for s in sources]
    assert len(places) == 3 and places == sorted(places)
    with pytest.raises(SystemExit, match="^2$"):
        main(["ask", str(story_index), "Where?", "--llm", "openai:m@http://127.0.0.1:9/v1", "--order", "time"])
    assert "invalid choice: 'time'" in capsys.readouterr().err
