"""The Ray engine on a real local Ray instance (2 CPUs on 127.0.0.1, started here, shut down after):
the same index as a local build, LLM calls spread over two llama.cpp endpoints and answered
once, an actor killed mid-build, a batch that keeps failing, and an address that does not answer."""
from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest
from _llm_server import SCRIPT, free_port, server_url
from _tiny_index import write_sample

from sirerag.cli.main import main
from sirerag.core.config import BuildConfig
from sirerag.engine.ray_engine import TEST_EXIT_ENV, EngineError
from sirerag.llm.cache import CallCache
from sirerag.pipeline.build import build_index

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'sirerag[ray]')")

pytestmark = pytest.mark.slow

FILES = ("entries.jsonl", "embeddings.npy")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_sample(tmp_path_factory.mktemp("ray_corpus") / "corpus.jsonl", 24)


@pytest.fixture(scope="module")
def cluster():
    """One local Ray instance for the module; the engine joins it instead of starting its own."""
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    try:
        yield ray.cluster_resources()
    finally:
        ray.shutdown()


def small(**engine) -> BuildConfig:
    return BuildConfig(trees=("similarity",)).with_overrides(tree={"levels": 3}, engine=engine).validate()


def summaries_of(report) -> int:
    return sum(level["nodes"] for level in report.counts["similarity_tree"]["levels"][1:])


@pytest.fixture(scope="module")
def local_index(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "index"
    build_index(corpus, out, small(), show_progress=False)
    return out


def test_a_ray_build_writes_the_same_index_as_a_local_build(cluster, corpus, local_index, tmp_path):
    assert cluster["CPU"] == 2
    out = tmp_path / "index"
    report = build_index(corpus, out, small(name="ray"), show_progress=False)
    assert summaries_of(report) >= 2  # summaries were written and embedded on the actors too
    for name in FILES:
        assert (out / name).read_bytes() == (local_index / name).read_bytes(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["engine"]["name"] == "ray"


def test_a_killed_actor_is_restarted_and_the_build_completes(cluster, corpus, local_index, tmp_path,
                                                             monkeypatch):
    marker = tmp_path / "exited"
    monkeypatch.setenv(TEST_EXIT_ENV, f"1:{marker}")  # the first actor to start a batch dies on it
    out = tmp_path / "index"
    build_index(corpus, out, small(name="ray"), show_progress=False)
    assert marker.is_file()  # an actor did exit ...
    assert int(marker.read_text()) != os.getpid()  # ... in a Ray worker process, not here
    for name in FILES:  # ... and its batch was retried
        assert (out / name).read_bytes() == (local_index / name).read_bytes(), name


def test_a_batch_that_keeps_failing_fails_the_build_with_one_clear_error(cluster, corpus, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv(TEST_EXIT_ENV, "1")  # every actor dies on its first batch
    with pytest.raises(EngineError, match=r"embedding documents .* failed \(Ray restarts an actor up to 1 times"):
        build_index(corpus, tmp_path / "index", small(name="ray", max_restarts=1, max_task_retries=1),
                    show_progress=False)
    assert not (tmp_path / "index" / "entries.jsonl").exists()


def test_an_address_that_does_not_answer_is_a_one_line_error(corpus, tmp_path, capsys):
    port = free_port()  # nothing listens there
    code = main(["build", str(corpus), "--out", str(tmp_path / "index"), "--engine", "ray",
                 "--ray-address", f"127.0.0.1:{port}", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert len(err.splitlines()) == 1
    assert f"engine.address '127.0.0.1:{port}': no Ray cluster answers at 127.0.0.1:{port} within 10s" in err
    assert not (tmp_path / "index").exists()


@pytest.fixture()
def second_server(tmp_path):
    """A second llama.cpp server (scripts/llama_server.sh) on a free port, stopped afterwards."""
    first = server_url()
    port = free_port()
    env = {**os.environ, "SIRERAG_SERVER_DIR": str(tmp_path / "llama")}
    started = subprocess.run(["bash", str(SCRIPT), "start", str(port)], env=env, capture_output=True, text=True,
                             timeout=300)
    if started.returncode != 0:
        pytest.fail(f"could not start a second llama.cpp server: {started.stderr[-1000:]}")
    try:
        yield first, f"http://127.0.0.1:{port}/v1", tmp_path / "llama" / f"server-{port}.log"
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(port)], env=env, capture_output=True, timeout=60)


@pytest.mark.server
def test_llm_calls_spread_over_two_endpoints_are_all_answered_and_a_rerun_makes_none(
        cluster, corpus, second_server, tmp_path, caplog):
    first, second, second_log = second_server
    down = f"http://127.0.0.1:{free_port()}/v1"
    config = BuildConfig(trees=("similarity",)).with_overrides(
        tree={"levels": 2, "summary_max_tokens": 24}, chunking={"mode": "passage"},
        llm={"spec": f"openai:smollm2@{first},{second},{down}", "max_concurrency": 2},
        engine={"name": "ray", "llm_batch_size": 1}).validate()
    out = tmp_path / "index"
    with caplog.at_level(logging.WARNING, logger="sirerag.llm.remote"):
        report = build_index(corpus, out, config, show_progress=False)
    assert f"LLM endpoint {down} is down" in caplog.text
    summaries = summaries_of(report)
    assert summaries >= 2
    stats = CallCache(out / "cache" / "llm").stats()
    assert stats["last_run"]["misses"] == stats["entries"] == summaries  # every call answered, once
    assert stats["last_run"]["failures"] == 0
    assert second_log.read_text().count("POST /v1/chat/completions") >= 1  # the second server took its share

    build_index(corpus, out, config, show_progress=False)
    again = CallCache(out / "cache" / "llm").stats()["last_run"]
    assert (again["hits"], again["misses"], again["failures"]) == (summaries, 0, 0)
