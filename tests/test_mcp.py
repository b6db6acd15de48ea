"""``sirerag mcp INDEX`` (issue 44, item 2): the MCP server over stdio, driven by the ``mcp`` package's own client
session, which launches ``python -m sirerag mcp INDEX`` as an agent would: the tools and the stats resource are
listed, ``search`` answers with the entries of one commit, a bad argument is a tool error with the command line's
message, and ``ask`` reads with the reader given by ``--llm`` (a scripted chat-completions server)."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from _llm_server import FlakyServer
from _tiny_index import QUESTION, build_tiny_index

pytest.importorskip("mcp", reason="the mcp extra")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

import sirerag  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return build_tiny_index(tmp_path_factory.mktemp("mcp"))


def session_run(index_dir: Path, work, *extra: str):
    """Run ``work(session)`` against ``python -m sirerag mcp INDEX`` started by the MCP client."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "sirerag", "mcp", str(index_dir), *extra],
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT))

    async def run():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await work(session)

    return asyncio.run(run())


def text_of(result) -> dict:
    return json.loads(result.content[0].text)


def test_tools_resource_and_search(index_dir):
    async def work(session):
        tools = await session.list_tools()
        resources = await session.list_resources()
        found = await session.call_tool("search", {"query": QUESTION, "k": 2, "retriever": "bm25"})
        stats = await session.read_resource("sirerag://stats")
        empty = await session.call_tool("search", {"query": " "})
        too_many = await session.call_tool("search", {"query": QUESTION, "k": 1000})
        no_reader = await session.call_tool("ask", {"question": QUESTION})
        return tools, resources, found, stats, empty, too_many, no_reader

    tools, resources, found, stats, empty, too_many, no_reader = session_run(index_dir, work)
    assert {t.name for t in tools.tools} == {"search", "ask"}
    assert [str(r.uri) for r in resources.resources] == ["sirerag://stats"]
    index = sirerag.Index.load(index_dir)
    result = text_of(found)
    assert not found.is_error and result["commit"] == index.loaded.commit and result["query"] == QUESTION
    assert [h["id"] for h in result["hits"]] == [r.entry_id for r in index.search(QUESTION, k=2, retriever="bm25")]
    assert result["hits"][0]["title"] == "Harwick Bridge"
    assert json.loads(stats.contents[0].text)["pool_entries"] == 3
    assert empty.is_error and "query must be a question or keywords, got ' '" in empty.content[0].text
    assert too_many.is_error and "k must be an integer from 1 to 100 (serve.max_k), got 1000" in too_many.content[0].text
    assert no_reader.is_error and "start it with --llm SPEC" in no_reader.content[0].text


def test_ask_reads_with_the_reader_of_llm(index_dir):
    def reply(body: dict) -> str:
        return "Answer: Margaret Lowe" if "Margaret Lowe" in body["messages"][-1]["content"] else "unknown"

    async def work(session):
        return await session.call_tool("ask", {"question": QUESTION, "k": 1, "retriever": "bm25"})

    with FlakyServer(reply=reply) as server:
        answer = session_run(index_dir, work, "--llm", f"openai:reader@{server.url}")
    result = text_of(answer)
    assert not answer.is_error and result["answer"] == "Margaret Lowe"
    assert [s["passages"] for s in result["sources"]] == [["harwick"]]
