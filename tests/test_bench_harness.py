"""The benchmark harness (benchmarks/harness.py): percentiles against numpy's, the report's JSON schema,
peak RSS of this process and of a child process, the timer's fields, that no benchmark keeps a timer,
a percentile or an RSS reading of its own or imports the tests, and bench_build's per-stage fields (the old
ones kept, tokens counted as the model sees them). No timing thresholds: nothing here depends
on the machine's speed."""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import harness

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))
# a child that holds 200 MiB of touched memory, far above an idle interpreter (~10-20 MiB)
ALLOCATE = "import sys; block = bytearray(200 * 2**20); block[::4096] = b'x' * len(block[::4096]); sys.exit(3)"


def test_percentiles_match_numpy_linear_method():
    rng = np.random.default_rng(0)
    values = rng.exponential(0.02, size=257)
    got = harness.percentiles(values, unit="ms", ndigits=9)
    want = np.percentile(values * 1000, [50, 95, 99], method="linear")
    assert got["n"] == 257
    assert got["p50_ms"] == pytest.approx(want[0], abs=1e-6)
    assert got["p95_ms"] == pytest.approx(want[1], abs=1e-6)
    assert got["p99_ms"] == pytest.approx(want[2], abs=1e-6)
    assert got["mean_ms"] == pytest.approx(values.mean() * 1000, abs=1e-6)
    assert harness.percentiles([1.0, 2.0, 3.0, 4.0])["p50_s"] == 2.5  # interpolated, not the lower of the two


def test_percentiles_of_nothing_and_unknown_units():
    assert harness.percentiles([], unit="ms") == {"n": 0, "mean_ms": None, "p50_ms": None, "p95_ms": None,
                                                  "p99_ms": None}
    with pytest.raises(ValueError, match="unit='us'"):
        harness.percentiles([1.0], unit="us")


def test_timer_reports_wall_cpu_and_children_seconds():
    with harness.Timer() as timer:
        sum(i * i for i in range(200_000))
    fields = timer.to_dict()
    assert set(fields) == {"wall_s", "cpu_s", "children_cpu_s"}
    assert timer.wall_s > 0 and timer.cpu_s > 0 and timer.children_cpu_s >= 0
    assert timer.to_dict() == fields  # frozen once the block has ended


def test_peak_rss_of_this_process_is_positive():
    assert harness.peak_rss_mib() > 1
    with pytest.raises(ValueError, match="expected 'self' or 'children'"):
        harness.peak_rss_mib("parent")


def test_run_command_measures_the_child_alone(tmp_path):
    result = harness.run_command([sys.executable, "-c", ALLOCATE], log=tmp_path / "child.log")
    assert result["returncode"] == 3
    assert result["peak_rss_mib"] > 200
    assert result["cpu_s"] >= 0 and result["wall_s"] > 0
    assert harness.peak_rss_mib("children") > 200  # and getrusage(RUSAGE_CHILDREN) has seen it too


def test_report_schema(tmp_path, capsys):
    report = harness.Report("bench_test", argv=["--x", "1"])
    report.results["latency"] = harness.percentiles([0.1, 0.2], unit="ms")
    report.results["ids"] = (np.int64(3), Path("a"))
    out = tmp_path / "report.json"
    written = report.write(out)
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document == json.loads(capsys.readouterr().out)
    assert written["results"] is report.results
    assert set(document) == {"schema", "machine", "command", "results"}
    assert document["schema"] == harness.SCHEMA
    machine = document["machine"]
    assert {"cpu_count", "cpu_model", "load_average_start", "load_average_end", "python", "torch", "numpy",
            "sirerag", "git"} <= set(machine)
    assert len(machine["load_average_start"]) == len(machine["load_average_end"]) == 3
    assert machine["git"]["commit"] is None or len(machine["git"]["commit"]) == 40
    command = document["command"]
    assert command["benchmark"] == "bench_test" and command["argv"] == ["--x", "1"]
    assert {"started", "finished", "wall_s", "cpu_s", "children_cpu_s", "peak_rss_mib"} <= set(command)
    assert command["peak_rss_mib"] > 1
    assert document["results"] == {"latency": {"n": 2, "mean_ms": 150.0, "p50_ms": 150.0, "p95_ms": 195.0,
                                               "p99_ms": 199.0}, "ids": [3, "a"]}


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_benchmarks_measure_only_through_the_harness(path):
    if path.name == "harness.py":
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert not names & {"perf_counter", "process_time", "getrusage", "percentile", "quantiles"}, path.name
    text = path.read_text(encoding="utf-8")
    assert "peak_rss_mb\"" not in text and "/usr/bin/time" not in text, path.name
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported.discard("__future__")
    assert not imported & {"resource", "statistics"}, path.name
    assert not any(m == "tests" or m.startswith(("tests.", "_")) for m in imported), path.name
    assert "sys.path.insert" not in text, path.name


class _Tokenizer:
    """Stands in for a Hugging Face tokenizer: one token per word plus [CLS] and [SEP]."""

    def __call__(self, texts, add_special_tokens=True, verbose=False):
        return {"input_ids": [[0] * (len(t.split()) + 2 * add_special_tokens) for t in texts]}


class _Model:
    tokenizer, max_seq_length = _Tokenizer(), 6


class _Embedder:
    model = _Model()


OLD_STAGE_FIELDS = {"stage", "wall_s", "cpu_s", "numba_compile_cpu_s", "texts_embedded", "texts_per_s",
                    "peak_rss_mib"}


def test_bench_build_stages_keep_the_old_fields_and_count_tokens_as_the_model_sees_them():
    from benchmarks.bench_build import Probe

    probe = Probe()
    start = harness.Mark.now()
    probe.on_stage("embed_leaves", "start", 0.0)
    probe.totals["embedded"] += 3
    probe.count_tokens(_Embedder(), ["one two", "one two three four five six", "one"])  # 4, 8 (cut to 6), 3
    probe.on_stage("embed_leaves", "end", 0.5)
    probe.on_stage("pool", "start", 0.0)
    probe.on_stage("pool", "end", 0.1)
    probe.cut("finish")
    assert [s["stage"] for s in probe.stages] == ["setup", "embed_leaves", "pool", "finish"]
    leaves = probe.stages[1]
    assert OLD_STAGE_FIELDS <= set(leaves)
    assert (leaves["texts_embedded"], leaves["tokens_embedded"], leaves["tokens_untruncated"],
            leaves["texts_truncated"]) == (3, 13, 15, 1)
    assert probe.stages[2]["tokens_embedded"] == 0
    total = probe.total(start)
    assert {"wall_s", "cpu_s", "texts_embedded", "peak_rss_mib", "numba_compilations", "token_count_s"} <= set(total)
    assert total["tokens_embedded"] == 13
    probe.count_tokens(object(), ["an embedder without a tokenizer"])
    assert probe.total(start)["tokens_embedded"] is None


def test_bench_build_counts_the_texts_the_embedding_cache_encodes(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.bench_build import Probe, _count_embeddings
    from sirerag.embedding.cache import CachedEmbedder, EmbeddingCache

    monkeypatch.setattr(CachedEmbedder, "_encode_missing", CachedEmbedder._encode_missing)
    probe = Probe()
    _count_embeddings(probe)
    cached = CachedEmbedder(_LengthEmbedder(), EmbeddingCache(tmp_path), block_size=2, show_progress=False)
    vectors = cached.encode_documents(["alpha beta", "gamma", "alpha beta", "delta epsilon zeta"])
    assert vectors.shape[0] == 4
    assert probe.totals["embedded"] == 3  # the repeated text is encoded once


class _LengthEmbedder:
    """Two-dimensional unit vectors from a text's length: enough for the cache to store and return."""

    spec = "test:length"
    dim = 2

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        angles = np.array([len(t) for t in texts], dtype=np.float32)
        return np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)

    encode_queries = encode_documents
