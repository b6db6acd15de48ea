"""Dry run of the relatedness stages: its requests are exactly those the extraction stage sends.

The model here is a stand-in that answers every request with a fixed text (the dry run
and the extraction code are what is tested; the real-model comparison of the summary
stages is in test_llm_build.py)."""
from __future__ import annotations

import json
from pathlib import Path

from sirerag.text.chunking import chunk_documents
from sirerag.cli.main import main
from sirerag.core.config import BuildConfig
from sirerag.extraction import extract
from sirerag.llm.accounting import request_tokens
from sirerag.llm.base import Completion, StreamingLLM
from sirerag.llm.cache import CachedLLM, CallCache
from sirerag.pipeline.dryrun import dry_run, format_report
from sirerag.core.types import Document

DATA = Path(__file__).resolve().parents[1] / "data" / "corpus.jsonl"


class StandIn(StreamingLLM):
    spec, model = "openai:m", "m"

    def __init__(self) -> None:
        self.requests = []

    def iter_complete(self, requests):
        for i, r in enumerate(requests):
            self.requests.append(r)
            yield i, Completion(text="{}", prompt_tokens=request_tokens(r), completion_tokens=1)


def documents(n: int = 3) -> list[Document]:
    rows = [json.loads(line) for line in DATA.open()][:n]
    return [Document(id=r["id"], title=r["title"], text=r["text"]) for r in rows]


def config(**extraction) -> BuildConfig:
    return BuildConfig().with_overrides(
        trees=("relatedness",), chunking={"mode": "tokens", "max_tokens": 40},
        llm={"spec": "openai:m@http://127.0.0.1:9/v1"}, relatedness={"summaries": False},
        extraction={"extractor": "llm", "max_attempts": 1, **extraction}).validate()


def test_rewrite_and_extraction_requests_match_the_extraction_stage(tmp_path):
    docs = documents()
    cfg = config()
    chunks = chunk_documents(docs, cfg.chunking)
    assert len(chunks) > len(docs)  # several chunks per document: the previous chunk is the context
    model = StandIn()
    extract(chunks, docs, config=cfg.extraction, llm=CachedLLM(model, CallCache(tmp_path / "llm")),
            show_progress=False)

    report = dry_run(docs, cfg, cache_dir=tmp_path, show_progress=False)
    stages = {s.stage: s for s in report.stages}
    assert list(stages) == ["coreference rewrite", "proposition extraction"]
    rewrite, extraction = stages["coreference rewrite"], stages["proposition extraction"]
    sent_rewrites = [r for r in model.requests if r.prompt_version.startswith("coref_rewrite")]
    assert rewrite.calls == len(chunks) == len(sent_rewrites)
    assert rewrite.cached == len(chunks)  # every planned request is one the stage really sent
    assert rewrite.input_tokens == sum(request_tokens(r) for r in sent_rewrites)
    assert rewrite.output_tokens_max == sum(r.max_tokens for r in sent_rewrites)
    assert extraction.calls == len(chunks) and extraction.cached == 0  # inputs depend on the rewrites
    assert "estimated" in extraction.basis and extraction.output_tokens_est > 0


def test_extraction_without_rewrite_is_exact(tmp_path):
    docs = documents()
    cfg = config(rewrite=False, extract_max_tokens=64)
    chunks = chunk_documents(docs, cfg.chunking)
    model = StandIn()
    extract(chunks, docs, config=cfg.extraction, llm=CachedLLM(model, CallCache(tmp_path / "llm")),
            show_progress=False)
    report = dry_run(docs, cfg, cache_dir=tmp_path, show_progress=False)
    (stage,) = report.stages
    assert stage.stage == "proposition extraction" and stage.calls == stage.cached == len(chunks)
    assert stage.input_tokens == sum(request_tokens(r) for r in model.requests)
    assert stage.output_tokens_max == 64 * len(chunks) and stage.output_tokens_est <= stage.output_tokens_max
    assert "proposition extraction" in format_report(report)


def test_offline_build_plans_no_call(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in documents(2)))
    assert main(["build", str(corpus), "--dry-run", "--json", str(tmp_path / "plan.json"), "--quiet"]) == 0
    assert "no LLM configured" in capsys.readouterr().out
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["stages"] == [] and plan["total"]["calls"] == 0 and plan["corpus"]["documents"] == 2
    assert main(["build", str(corpus), "--quiet"]) == 1  # without --dry-run, --out is required
    assert "--out is required" in capsys.readouterr().err
