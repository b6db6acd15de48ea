"""``sirerag serve`` (issue 44): every route on the three-document index, the bounds of a request, the API-key
rule, errors as the command line's lines, a swap picked up between requests (and a request that meets one run
again on the new commit), searches off the event loop, and the real server on a port the system chose. The app
runs in process through Starlette's test client or httpx's ASGI transport; the reader is a scripted
chat-completions server."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _llm_server import FlakyServer
from _tiny_index import QUESTION, build_tiny_index, write_corpus

pytest.importorskip("fastapi", reason="the serve extra")
import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

import sirerag  # noqa: E402
import sirerag.serve.indexes as served_mod  # noqa: E402
from sirerag.cli.main import main  # noqa: E402
from sirerag.core.config.serve import ServeConfig  # noqa: E402
from sirerag.core.errors import ConfigError  # noqa: E402
from sirerag.serve.app import create_app  # noqa: E402
from sirerag.serve.indexes import check_bind, is_loopback, parse_indexes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KEY = "k" * 24
NEW = {"id": "vantor", "title": "Vantor Lighthouse", "text": "The Vantor Lighthouse stands on Cape Ormel since 1877."}


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return build_tiny_index(tmp_path_factory.mktemp("serve"))


@pytest.fixture()
def client(index_dir):
    with TestClient(create_app({"tiny": index_dir})) as client:
        yield client


def test_health_indexes_stats_and_the_openapi_schema(client, index_dir):
    assert client.get("/health").json() == {"status": "ok", "sirerag": sirerag.__version__, "indexes": ["tiny"]}
    loaded = sirerag.Index.load(index_dir)
    (info,) = client.get("/indexes").json()["indexes"]
    assert info == {"name": "tiny", "commit": loaded.loaded.commit, "entries": 3, "documents": 3, "trees": [],
                    "graph": False, "embedder": loaded.manifest.embedder.spec}
    stats = client.get("/indexes/tiny/stats").json()
    assert stats["commit"] == loaded.loaded.commit and stats["pool_entries"] == 3 and stats["chunks"] == 3
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/search", "/ask", "/indexes", "/indexes/{name}/stats", "/health"} <= set(paths)


def test_search_one_query_and_a_batch_from_one_commit(client, index_dir):
    expected = sirerag.Index.load(index_dir).search(QUESTION, k=2, retriever="bm25")
    one = client.post("/search", json={"query": QUESTION, "k": 2, "retriever": "bm25"}).json()
    assert one["index"] == "tiny" and one["k"] == 2 and one["ranking"]["retriever"] == "bm25"
    (result,) = one["results"]
    assert result["query"] == QUESTION
    assert [(h["rank"], h["id"], h["title"]) for h in result["hits"]] == \
        [(n, r.entry_id, r.title) for n, r in enumerate(expected, start=1)]
    assert result["hits"][0]["title"] == "Harwick Bridge" and result["hits"][0]["passages"] == ["harwick"]
    batch = client.post("/search", json={"queries": [QUESTION, "Which river flows into the North Sea?"], "k": 1,
                                         "retriever": "dense", "options": {"pool_rule": "native"}}).json()
    assert [r["hits"][0]["passages"] for r in batch["results"]] == [["harwick"], ["elm"]]
    assert batch["commit"] == one["commit"] == sirerag.Index.load(index_dir).loaded.commit


def test_the_keyword_graph_over_the_network_takes_its_search_options_only(client, index_dir):
    options = {"mode": "hop", "seeds": 1, "keywords": "entities"}
    expected = sirerag.Index.load(index_dir).search(QUESTION, k=3, retriever="keyword-graph", **options)
    got = client.post("/search", json={"query": QUESTION, "k": 3, "retriever": "keyword-graph", "options": options})
    assert got.status_code == 200 and got.json()["ranking"]["retriever"] == "keyword-graph"
    assert [h["id"] for h in got.json()["results"][0]["hits"]] == [r.entry_id for r in expected]
    refused = client.post("/search", json={"query": QUESTION, "retriever": "keyword-graph",
                                           "options": {"max_passages": 10**9}})
    assert refused.status_code == 400 and "options ['max_passages'] are not taken over the network" in refused.text


def test_several_indexes_each_by_name(tmp_path, index_dir):
    other = tmp_path / "other"
    sirerag.Index.build(write_corpus(tmp_path / "c.jsonl", [NEW]), other, trees=[]).close()
    with TestClient(create_app(parse_indexes([str(index_dir), f"lights={other}"]))) as client:
        assert [i["name"] for i in client.get("/indexes").json()["indexes"]] == ["index", "lights"]
        hits = client.post("/search", json={"index": "lights", "query": "lighthouse", "k": 1}).json()
        assert hits["results"][0]["hits"][0]["passages"] == ["vantor"]
        missing = client.post("/search", json={"index": "nope", "query": "x"})
        assert missing.status_code == 404
        assert missing.json() == {"error": "unknown index 'nope'; this server serves ['index', 'lights']"}
        assert client.get("/indexes/nope/stats").status_code == 404
        unnamed = client.post("/search", json={"query": "x"})
        assert unnamed.status_code == 400 and "name the index" in unnamed.json()["error"]
    with pytest.raises(ConfigError, match="the name 'index' is given twice"):
        parse_indexes([str(index_dir), f"index={other}"])


@pytest.mark.parametrize("body, status, message", [
    ({"query": QUESTION, "k": 0}, 400, "k must be an integer from 1 to 10 (serve.max_k), got 0"),
    ({"query": QUESTION, "k": 11}, 400, "k must be an integer from 1 to 10 (serve.max_k), got 11"),
    ({"queries": ["a", "b", "c"]}, 400, "a batch of 3 queries; give 1 to 2 (serve.max_batch)"),
    ({"queries": []}, 400, "a batch of 0 queries; give 1 to 2 (serve.max_batch)"),
    ({"query": "x" * 41}, 400, "query is 41 characters long, over the limit of 40 (serve.max_query_chars)"),
    ({"queries": ["ok", "x" * 41]}, 400, "query 2 is 41 characters long, over the limit of 40 (serve.max_query_chars)"),
    ({"query": "  "}, 400, "query must be a question or keywords, got ' '"),  # on one line, as the CLI prints it
    ({"query": "a", "queries": ["b"]}, 400, "give either query (one) or queries (a batch)"),
    ({"query": QUESTION, "k": "5"}, 400, "k: Input should be a valid integer"),
    ({"query": QUESTION, "colour": 1}, 400, "colour: Extra inputs are not permitted"),
    ({"query": QUESTION, "options": {"checkpoint": "/tmp/x"}}, 400,
     "options ['checkpoint'] are not taken over the network; allowed: ['fusion', 'keywords', 'leaf_share', "
     "'lift_ratio', 'linking', 'mode', 'passage_weight', 'pool_rule', 'seeds']"),
    ({"query": "x" * 30, "queries": None, "retriever": "x" * 300}, 413,
     "the request body is larger than 300 bytes (serve.max_body_bytes)"),
])
def test_the_bounds_of_a_request(index_dir, body, status, message):
    config = ServeConfig(max_k=10, max_batch=2, max_query_chars=40, max_body_bytes=300)
    with TestClient(create_app({"tiny": index_dir}, config)) as client:
        answer = client.post("/search", json=body)
    assert (answer.status_code, answer.json()) == (status, {"error": message})


def test_an_error_is_the_line_the_command_line_prints(client, index_dir, capsys):
    assert main(["search", str(index_dir), QUESTION, "--retriever", "nope"]) == 1
    line = capsys.readouterr().err.strip()
    answer = client.post("/search", json={"query": QUESTION, "retriever": "nope"})
    assert answer.status_code == 400
    assert line == f"sirerag search: error: {answer.json()['error']}" and "got 'nope'" in line


def test_the_api_key_is_asked_everywhere_but_health(index_dir):
    with TestClient(create_app({"tiny": index_dir}, api_key=KEY)) as client:
        assert client.get("/health").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": KEY[:-1]}):
            refused = client.get("/indexes", headers=headers)
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert "API key" in refused.json()["error"]
        assert client.get("/openapi.json").status_code == 401
        assert client.get("/indexes", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert client.post("/search", json={"query": QUESTION}, headers={"X-API-Key": KEY}).status_code == 200


def test_listening_beyond_loopback_needs_a_key(index_dir, monkeypatch, capsys):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4") and not is_loopback("example.org")
    check_bind("127.0.0.1", None, env="SIRERAG_API_KEY")
    check_bind("0.0.0.0", KEY, env="SIRERAG_API_KEY")
    with pytest.raises(ConfigError, match="--host 0.0.0.0 is not a loopback address: set SIRERAG_API_KEY"):
        check_bind("0.0.0.0", None, env="SIRERAG_API_KEY")
    with pytest.raises(ConfigError, match="SIRERAG_API_KEY must be at least 16 characters, got 5"):
        check_bind("127.0.0.1", "short", env="SIRERAG_API_KEY")
    monkeypatch.delenv("SIRERAG_API_KEY", raising=False)
    assert main(["serve", str(index_dir), "--host", "0.0.0.0", "--port", "0"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("sirerag serve: error: --host 0.0.0.0 is not a loopback address") and "\n" not in err


def _add(index_dir: Path, tmp_path: Path) -> None:
    with sirerag.Index.load(index_dir) as writer:  # another Index (as another process would): an add in place
        writer.add(write_corpus(tmp_path / "new.jsonl", [NEW]))


def test_a_swap_is_picked_up_between_requests(tmp_path):
    index_dir = build_tiny_index(tmp_path)
    with TestClient(create_app({"tiny": index_dir})) as client:
        before = client.post("/search", json={"query": "lighthouse on a cape", "k": 5, "retriever": "bm25"}).json()
        assert before["results"][0]["hits"] == []  # bm25 knows no such word yet
        _add(index_dir, tmp_path)
        after = client.post("/search", json={"query": "lighthouse on a cape", "k": 5, "retriever": "bm25"}).json()
        info = client.get("/indexes").json()["indexes"][0]
    fresh = sirerag.Index.load(index_dir)
    assert after["commit"] == fresh.loaded.commit == info["commit"] != before["commit"] and info["entries"] == 4
    (hit,) = after["results"][0]["hits"]
    assert hit["passages"] == ["vantor"] and hit["text"] == fresh.pool.get(hit["id"]).text


def test_a_request_that_meets_a_swap_runs_again_on_the_new_commit(tmp_path, monkeypatch):
    index_dir = build_tiny_index(tmp_path)
    with TestClient(create_app({"tiny": index_dir})) as client:
        old = client.post("/search", json={"query": QUESTION, "retriever": "dense"}).json()["commit"]
        monkeypatch.setattr(served_mod, "_stamp", lambda path: None)  # the server does not see the swap coming
        client.post("/search", json={"query": QUESTION, "retriever": "dense"})  # (the stamp changes once: reload)
        _add(index_dir, tmp_path)
        # the request leases the old commit; loading bm25/ of it raises IndexChangedError; it runs on the new one
        answer = client.post("/search", json={"query": "lighthouse on a cape", "retriever": "bm25"}).json()
    assert answer["commit"] == sirerag.Index.load(index_dir).loaded.commit != old
    assert answer["results"][0]["hits"][0]["passages"] == ["vantor"]


def test_searches_run_off_the_event_loop_and_overlap(index_dir, monkeypatch):
    barrier = threading.Barrier(2, timeout=30)
    real = sirerag.Index.search_many

    def gated(self, *args, **kwargs):
        barrier.wait()  # passes only when both searches run at once, in worker threads
        return real(self, *args, **kwargs)

    monkeypatch.setattr(sirerag.Index, "search_many", gated)
    app = create_app({"tiny": index_dir}, ServeConfig(workers=2))

    async def both() -> list[httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                return await asyncio.gather(*(http.post("/search", json={"query": q, "k": 1})
                                              for q in (QUESTION, "Elm river")))

    answers = asyncio.run(both())
    assert [a.status_code for a in answers] == [200, 200] and not barrier.broken


def reply(body: dict) -> str:
    return "Answer: Margaret Lowe" if "Margaret Lowe" in body["messages"][-1]["content"] else "unknown"


def test_ask_answers_with_the_configured_reader(index_dir):
    with TestClient(create_app({"tiny": index_dir})) as client:
        refused = client.post("/ask", json={"question": QUESTION})
        assert refused.status_code == 400
        assert refused.json()["error"] == "this server has no reader: start it with --llm SPEC to answer /ask"
    with FlakyServer(reply=reply) as server:
        config = ServeConfig(llm=f"openai:reader@{server.url}", max_answer_tokens=100)
        with TestClient(create_app({"tiny": index_dir}, config)) as client:
            answer = client.post("/ask", json={"question": QUESTION, "k": 1, "retriever": "bm25"}).json()
            too_long = client.post("/ask", json={"question": QUESTION, "max_tokens": 101})
            failing = client.post("/ask", json={"question": QUESTION + " [always:500]", "retriever": "bm25"})
    assert answer["answer"] == "Margaret Lowe" and answer["llm"] == "openai:reader"
    assert [s["passages"] for s in answer["sources"]] == [["harwick"]] and answer["index"] == "tiny"
    assert too_long.status_code == 400
    assert too_long.json()["error"] == "max_tokens must be an integer from 1 to 100 (serve.max_answer_tokens), got 101"
    assert failing.status_code == 502 and "\n" not in failing.json()["error"]


def test_the_real_server_on_a_port_the_system_chose(index_dir):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SIRERAG_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "-m", "sirerag", "serve", f"tiny={index_dir}", "--port", "0"],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = []
        for line in proc.stderr:  # the line comes once the socket listens
            lines.append(line)
            found = re.search(r"serving tiny on (http://127\.0\.0\.1:\d+)", line)
            if found:
                break
        assert found, "".join(lines)
        with httpx.Client(base_url=found.group(1), timeout=60) as http:
            assert http.get("/health").json()["indexes"] == ["tiny"]
            hits = http.post("/search", json={"query": QUESTION, "k": 1}).json()["results"][0]["hits"]
            assert hits[0]["title"] == "Harwick Bridge"
            assert json.loads(http.get("/indexes/tiny/stats").text)["documents"] == 3
    finally:
        proc.terminate()
        rest = proc.stderr.read()
        code = proc.wait(timeout=60)
        proc.stderr.close()
    # uvicorn shuts down cleanly on SIGTERM (the lifespan's end), then re-raises the signal, as it does since 0.29
    assert "Application shutdown complete" in rest and code in (0, -15), rest
