"""``sirerag ask`` and ``Index.ask``: retrieve, read with the QA reader's prompt under a token budget, print the
answer with numbered sources (title, passage id); ``--json``; a reader that fails or a bad setting is one clear
error. The reader is a scripted chat-completions server (``FlakyServer(reply=...)``), never a real model."""
from __future__ import annotations

import json
import re
import socket
import time

import pytest
from _llm_server import FlakyServer, free_port
from _tiny_index import QUESTION, build_tiny_index

import sirerag
from sirerag.answers import Answer
from sirerag.results import SearchResult
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
    assert "--llm must look like openai:MODEL" in capsys.readouterr().err
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


# -- the address rules: a URL typo never goes to OpenAI's API ----------------------------------------------
@pytest.mark.parametrize("spec", ["openai:x@localhost:18451/v1", "openai:x@127.0.0.1:18451",
                                  "openai:x@ftp://127.0.0.1/v1", "openai:127.0.0.1:18451/v1"])
def test_a_url_typo_in_the_reader_is_refused_before_any_work(index_dir, capsys, monkeypatch, spec):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-0123456789")
    assert main(["ask", str(index_dir), QUESTION, "--llm", spec]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sirerag ask: error: --llm {spec}: ")
    with sirerag.Index.load(index_dir) as index:
        with pytest.raises(ConfigError, match=f"^llm {re.escape(spec)}: .*(server URL must be http|reads as a server)"):
            index.ask(QUESTION, spec)
    with pytest.raises(ConfigError, match="(server URL must be http|reads as a server address)"):
        load_llm(spec)


# -- what ask prints: no control or bidi characters on the terminal; --json exact -----------------------
HOSTILE = "\x1b[2J\x1b[31mMargaret\u202e Lowe\x07\u2066x\u2069\x9b"


def test_ask_strips_control_and_bidi_characters_from_its_text_output(index_dir, capsys):
    with FlakyServer(reply=lambda body: HOSTILE) as server:
        assert main(["ask", str(index_dir), QUESTION, "--llm", f"openai:reader@{server.url}", "-k", "1",
                     "--retriever", "bm25"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("[2J[31mMargaret Lowex\n\nsources:\n  [1] Harwick Bridge (passage harwick)\n")
        assert main(["ask", str(index_dir), QUESTION, "--llm", f"openai:reader@{server.url}", "-k", "1",
                     "--retriever", "bm25", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["answer"] == HOSTILE  # --json keeps the text exact


def test_an_answers_sources_are_printed_without_control_or_bidi_characters():
    source = SearchResult(entry_id="e", score=1.0, text="t", title="evil\u202egnp.exe\x1b]0;x\x07", tree="similarity",
                          kind="leaf", level=0, passages=("p\x1b[1m",), section="s\u2067")
    answer = Answer(question="q", text="ok", sources=(source,), llm="openai:m", context_tokens=1)
    assert str(answer) == "ok\n\nsources:\n  [1] evilgnp.exe]0;x > s (passage p[1m)"
    assert answer.to_dict()["sources"][0]["title"] == "evil\u202egnp.exe\x1b]0;x\x07"


# -- bounded waits: the endpoint is checked first, Retry-After is capped, one deadline ----------------------
def one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_ask_against_a_server_that_never_answers_ends_at_its_timeout(index_dir, capsys):
    with socket.socket() as listener:  # the kernel accepts connections; nobody ever answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        spec = f"openai:m@http://127.0.0.1:{listener.getsockname()[1]}/v1"
        started = time.monotonic()
        assert main(["ask", str(index_dir), QUESTION, "--llm", spec, "--timeout", "2"]) == 1
        assert re.search(r"error: llm openai:m at http://127\.0\.0\.1:\d+/v1: no answer within 2s; the endpoint "
                         r"must answer before any work starts$", one_error(capsys))
        with sirerag.Index.load(index_dir) as index, \
                pytest.raises(ConfigError, match="no answer within 1s; the endpoint must answer"):
            index.ask(QUESTION, spec, llm_config=LLMConfig(timeout=1.0))
        assert time.monotonic() - started < 30  # before: 6 attempts of 120 s each


def test_ask_against_a_refused_connection_stops_at_the_endpoint_check(index_dir, capsys):
    spec = f"openai:m@http://127.0.0.1:{free_port()}/v1"
    started = time.monotonic()
    assert main(["ask", str(index_dir), QUESTION, "--llm", spec]) == 1
    assert re.search(r"error: llm openai:m at http://127\.0\.0\.1:\d+/v1: connection error: .*refused.*; the "
                     r"endpoint must answer before any work starts$", one_error(capsys))
    with sirerag.Index.load(index_dir) as index, pytest.raises(ConfigError, match="connection error: .*refused"):
        index.ask(QUESTION, spec)
    assert time.monotonic() - started < 30  # before: 6 attempts with backoff, 24-30 s


def test_a_long_retry_after_is_capped_and_the_deadline_holds(index_dir, capsys, tmp_path):
    config = tmp_path / "reader.toml"
    config.write_text("[llm]\nmax_retries = 2\nretry_base_delay = 0.0\nretry_max_delay = 60.0\n"
                      "retry_after_max = 0.0\n")
    question = f"{QUESTION} [retry-after:100000]"
    started = time.monotonic()
    with FlakyServer(reply=reply) as server:
        spec = f"openai:reader@{server.url}"
        # capped at llm.retry_after_max (0 s here): all three attempts, at once
        assert main(["ask", str(index_dir), question, "--llm", spec, "--config", str(config)]) == 1
        assert re.search(r"HTTP 429.*\(gave up after 3 attempts\)$", one_error(capsys))
        assert server.seen[next(m for m in server.seen if "[retry-after" in m)] == 3
        # the default cap is 30 s, longer than a 2 s deadline: one attempt, then the deadline
        assert main(["ask", str(index_dir), question, "--llm", spec, "--timeout", "2"]) == 1
        assert re.search(r"HTTP 429.*\(gave up after 1 attempt at the deadline\)$", one_error(capsys))
        with sirerag.Index.load(index_dir) as index, \
                pytest.raises(LLMCallError, match=r"HTTP 429.*gave up after 1 attempt at the deadline"):
            index.ask(question, spec, llm_config=LLMConfig(deadline=2.0))
    assert time.monotonic() - started < 30  # before: five waits of 60 s
    assert LLMConfig().retry_after_max == 30.0


def test_ask_refuses_a_bad_timeout_or_config_in_one_line(index_dir, capsys, tmp_path):
    assert main(["ask", str(index_dir), QUESTION, "--llm", "openai:m@http://127.0.0.1:9/v1", "--timeout", "0"]) == 1
    assert one_error(capsys) == "sirerag ask: error: --timeout must be a positive number of seconds, got 0.0"
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm]\ndeadline = -1\n")
    assert main(["ask", str(index_dir), QUESTION, "--llm", "openai:m@http://127.0.0.1:9/v1", "--config", str(bad)]) == 1
    assert "llm.deadline must be a positive number of seconds, got -1" in one_error(capsys)
#: a story told in order, split into chunks of one sentence each: which came first decides the answer
STORY = ["Mary went to the kitchen.", "Mary picked up the apple there.", "Mary travelled to the garden.",
         "Mary dropped the apple in the garden.", "John moved to the hallway."]


@pytest.fixture(scope="module")
def story_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("story")
    from sirerag.core.types import Document

    rows = [Document(id="story", text=" ".join(STORY)),
            Document(id="other", title="Other", text="The apple is a fruit that grows on trees.")]
    sirerag.Index.build(rows, root / "index", trees=[], chunking={"max_tokens": 8}, show_progress=False).close()
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
    from sirerag.answers import document_order
    from sirerag.results import SearchResult

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
