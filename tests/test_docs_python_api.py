"""docs/python-api.md runs as written: every ``python`` block of the page, in order, in a fresh folder.

The only change is the LLM server of the ``ask`` example, which points at a scripted
chat-completions server (``FlakyServer(reply=...)``) that answers from the context it is given.
This covers the notebook flow end to end: build a folder corpus, search, update with an edited and
a deleted file, remove, export, ask, close, and a query through llama-index and LangChain.
"""
from __future__ import annotations

import re
from pathlib import Path

from _llm_server import FlakyServer

PAGE = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"
DOC_URL = "http://127.0.0.1:8000/v1"


def page_code() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 8, "the page lost its examples"
    return "\n".join(blocks)


def reply(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    return "Margaret Lowe" if "designed by Margaret Lowe" in prompt.split("Question:")[0] else "unknown"


def test_the_python_api_page_runs_as_written(tmp_path, monkeypatch, capsys):
    code = page_code()
    assert DOC_URL in code
    monkeypatch.chdir(tmp_path)
    with FlakyServer(reply=reply) as server:
        exec(compile(code.replace(DOC_URL, server.url), str(PAGE), "exec"), {"__name__": "python_api_page"})
        asked = [b for b in server.bodies if "Who designed the Harwick Bridge?" in b["messages"][-1]["content"]]
    out = capsys.readouterr().out
    assert "refused: [chunking] max_tokens must be an integer" in out
    assert "1 updated" in out and "1 removed" in out
    assert "Margaret Lowe\n\nsources:\n  [1] bridges/harwick.md > Harwick Bridge (passage " \
           "bridges/harwick.md#harwick-bridge)" in out
    assert len(asked) == 1  # ask made one reader call, with the QA reader's prompt
    assert "Answer the question in as few words as possible." in asked[0]["messages"][-1]["content"]
    assert (tmp_path / "my_export" / "corpus.jsonl").is_file()
    assert out.rstrip().endswith("Margaret Lowe")  # the LangChain chain's answer, printed last
