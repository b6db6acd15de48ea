"""The dry run's time estimate: the embedder calibration cached per machine and model, the LLM server's tokens per
second from two requests, and each stage's wall time from them. Every figure here is injected (a scripted clock, a
given Throughput): nothing depends on the machine's speed."""
from __future__ import annotations

import itertools
import json

import pytest
from _llm_server import FlakyServer, free_port

from sirerag.cli.main import main
from sirerag.core.config import BuildConfig
from sirerag.llm.base import Completion
from sirerag.pipeline import timing
from sirerag.pipeline.dryrun import add_times, dry_run, format_report
from sirerag.pipeline.dryrun_estimates import StageEstimate
from sirerag.pipeline.timing import StageTime, Throughput, estimate_times
from sirerag.text.tokens import count_tokens_many
from sirerag.core.types import Document


def ticking(step: float = 2.0):
    """A clock that advances ``step`` seconds at every reading."""
    counter = itertools.count()
    return lambda: next(counter) * step


class CountingEmbedder:
    def __init__(self) -> None:
        self.calls = 0

    def encode_documents(self, texts):
        self.calls += 1
        return [[0.0]] * len(texts)


def test_the_calibration_is_cached_per_machine_and_model(tmp_path, monkeypatch):
    config = BuildConfig()
    made: list[CountingEmbedder] = []

    def load():
        made.append(CountingEmbedder())
        return made[-1]

    tokens = sum(count_tokens_many(timing.calibration_texts()))
    rate, note = timing.embedder_throughput(config, folder=tmp_path, load=load, clock=ticking(2.0))
    assert rate == pytest.approx(tokens / 2.0) and "calibrated now" in note
    assert len(made) == 1 and made[0].calls == 2  # a warm-up batch, then the timed one
    again, note = timing.embedder_throughput(config, folder=tmp_path, load=load, clock=ticking(9.0))
    assert again == rate and len(made) == 1 and "calibrated 20" in note  # from the cache: nothing loaded
    other_model = BuildConfig().with_overrides(embedder={"batch_size": 8})
    timing.embedder_throughput(other_model, folder=tmp_path, load=load, clock=ticking(1.0))
    assert len(made) == 2
    monkeypatch.setattr(timing, "machine", lambda: {"host": "elsewhere", "cores": 64})
    moved, _ = timing.embedder_throughput(config, folder=tmp_path, load=load, clock=ticking(4.0))
    assert len(made) == 3 and moved == pytest.approx(tokens / 4.0)
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_an_api_embedder_is_not_calibrated(tmp_path):
    config = BuildConfig().with_overrides(embedder={"spec": "openai:text-embedding-3-small"})
    rate, note = timing.embedder_throughput(config, folder=tmp_path, load=lambda: pytest.fail("loaded"))
    assert rate is None and "not calibrated" in note


class ScriptedLLM:
    spec = "scripted"

    def __init__(self) -> None:
        self.requests = []

    def complete(self, request):
        self.requests.append(request)
        return Completion(text="x", prompt_tokens=100, completion_tokens=request.max_tokens)


def test_the_llm_speed_comes_from_one_token_then_more():
    llm = ScriptedLLM()
    reads = iter([0.0, 0.5, 1.0, 3.0])  # the first request takes 0.5 s, the second 2 s
    prefill, decode = timing.llm_throughput(llm, clock=lambda: next(reads))
    assert [r.max_tokens for r in llm.requests] == [1, 1, 1 + timing.PROBE_OUTPUT_TOKENS]  # a warm-up first
    assert prefill == pytest.approx(100 / 0.5)
    assert decode == pytest.approx(timing.PROBE_OUTPUT_TOKENS / 1.5)  # the extra tokens over the extra time


def _row(plan_stage: str, calls: int, cached: int = 0) -> StageEstimate:
    return StageEstimate("x", calls, input_tokens=1000 * calls, output_tokens_max=100 * calls,
                         output_tokens_est=50 * calls, basis="", cached=cached, plan_stage=plan_stage)


def test_each_stage_gets_its_llm_and_embedding_time():
    plan = ["load", "embed_leaves", "similarity_tree", "extraction", "pool", "graph"]
    rows = [_row("similarity_tree", 10), _row("extraction", 20, cached=10)]
    corpus = {"documents": 5, "chunks": 20, "chunk_tokens": 4000}
    times = {t.stage: t for t in estimate_times(plan, rows, corpus, Throughput(2000.0, 1000.0, 10.0))}
    assert times["load"] == StageTime("load", 0.0, "no model work")
    assert times["embed_leaves"].seconds == pytest.approx(4000 / 2000)
    # 10 calls of 1000 input and 50 output tokens, then their 500 summary tokens embedded
    assert times["similarity_tree"].seconds == pytest.approx(10 * (1 + 5) + 500 / 2000)
    assert times["extraction"].seconds == pytest.approx(0.5 * 20 * (1 + 5))  # half of its requests are cached
    assert times["graph"].seconds is None and times["pool"].seconds == 0.0
    unmeasured = {t.stage: t for t in estimate_times(plan, rows, corpus, Throughput(2000.0))}
    assert unmeasured["extraction"].seconds is None and "LLM speed not measured" in unmeasured["extraction"].basis
    assert unmeasured["embed_leaves"].seconds == pytest.approx(2.0)
    assert unmeasured["similarity_tree"].seconds is None  # the LLM part is unknown, the embedding is not
    assert unmeasured["similarity_tree"].basis.startswith("10 LLM calls: LLM speed not measured; 500 tokens to embed")


def test_the_dry_run_prints_and_writes_the_times(tmp_path, capsys, monkeypatch):
    docs = [Document(id=f"d{i}", title=f"T{i}", text="The river flows through the old city. " * 10) for i in range(3)]
    config = BuildConfig().with_overrides(trees=(), chunking={"mode": "passage"})
    given = Throughput(500.0, notes=("embedder minilm: 500 tokens/s (injected)",))
    report = dry_run(docs, config, show_progress=False, throughput=given)
    embed = next(t for t in report.times if t.stage == "embed_leaves")
    assert embed.seconds == pytest.approx(report.corpus["chunk_tokens"] / 500.0)
    text = format_report(report)
    assert "estimated wall time" in text and "embedder minilm: 500 tokens/s (injected)" in text
    assert report.to_dict()["time"]["total_s"] == pytest.approx(embed.seconds)
    assert "time" not in dry_run(docs, config, show_progress=False).to_dict()

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in docs))
    monkeypatch.setattr(timing, "measure", lambda config, folder=None: given)
    assert main(["build", str(corpus), "--trees", "none", "--dry-run", "--json", str(tmp_path / "plan.json"),
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "embed_leaves" in out and "(injected)" in out
    assert json.loads((tmp_path / "plan.json").read_text())["time"]["throughput"]["embed_tokens_per_s"] == 500.0
    monkeypatch.setattr(timing, "measure", lambda config, folder=None: pytest.fail("measured with --no-time"))
    assert main(["build", str(corpus), "--trees", "none", "--dry-run", "--no-time", "--quiet"]) == 0
    assert "estimated wall time" not in capsys.readouterr().out


def test_an_llm_server_is_timed_and_openais_api_is_not(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr(timing, "embedder_throughput", lambda config, folder=None: (1000.0, "embedder injected"))
    with FlakyServer(reply=lambda body: "ok") as server:
        config = BuildConfig().with_overrides(llm={"spec": f"openai:m@{server.url}"})
        measured = timing.measure(config)
    assert [b["max_tokens"] for b in server.bodies] == [1, 1, 1 + timing.PROBE_OUTPUT_TOKENS]
    assert measured.llm_input_tokens_per_s > 0 and measured.llm_output_tokens_per_s > 0
    assert "measured now with 3 short requests" in measured.notes[-1]
    report = add_times(dry_run([Document(id="a", text="Some text.")], BuildConfig().with_overrides(trees=()),
                               show_progress=False), measured)
    assert "the LLM endpoint timed with 3 short requests" in format_report(report)
    paid = timing.measure(BuildConfig().with_overrides(llm={"spec": "openai:gpt-4o-mini"}))
    assert paid.llm_output_tokens_per_s is None and "OpenAI's API is not measured" in paid.notes[-1]
    gone = timing.measure(BuildConfig().with_overrides(llm={"spec": f"openai:m@http://127.0.0.1:{free_port()}/v1"}))
    assert gone.llm_output_tokens_per_s is None and "did not answer the timing request" in gone.notes[-1]
    local = timing.measure(BuildConfig().with_overrides(llm={"spec": "hf:smollm2"}))
    assert local.llm_output_tokens_per_s is None and "local model is not loaded" in local.notes[-1]
