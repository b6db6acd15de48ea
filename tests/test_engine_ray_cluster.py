"""A real two-node Ray cluster on 127.0.0.1: a head and a second node started as separate processes
(`ray start --head`, then `ray start --address`), each with one CPU. `sirerag build --engine ray
--ray-address HOST:PORT` joins it, its two embedding actors (one CPU each) are placed one on each node, and
the index it writes is byte-identical to a local build's. Both builds cluster by sample-and-assign (forced on
at this size), so the cluster's build also runs the assignment of the unsampled rows on the nodes."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from _llm_server import free_port
from _tiny_index import write_sample

from sirerag.core.config import BuildConfig
from sirerag.engine.ray_engine import check_reachable
from sirerag.pipeline.build import build_index

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'sirerag[ray]')")

pytestmark = pytest.mark.slow

#: sample-and-assign on every step over 32 rows: the global step over the 24 passages' 42 leaves
SAMPLED = {"sample_above": 0, "sample_size": 32}
FILES = ("documents.jsonl", "chunks.jsonl", "entries.jsonl", "embeddings.npy")
START_TIMEOUT = 180.0  # seconds for both nodes to register on a loaded machine
#: the nodes, the node count and the build (the driver) in one authentication mode, token, with the token of
#: ~/.ray/auth_token (what a local ``ray.init`` writes and reads): left unset, a head that finds that token requires
#: it and a joining node does not send it; a driver already in token mode cannot use a cluster without it
NODE_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}


def _ray_cli() -> str:
    found = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    if not Path(found).exists():
        pytest.fail("the ray extra is installed but its 'ray' command is not on PATH")
    return found


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """One `ray start ... --block` process in its own session: stopping it stops the node it started."""
    handle = log.open("wb")
    return subprocess.Popen([_ray_cli(), "start", "--block", "--disable-usage-stats", "--num-cpus=1",
                             "--node-ip-address=127.0.0.1", *args], stdout=handle, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, **NODE_ENV})


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # `ray start --block` stops its node's processes on SIGTERM
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # anything of that node still running
    except ProcessLookupError:
        pass


_COUNT_NODES = """
import sys, time, ray
ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
deadline = time.monotonic() + float(sys.argv[3])
while True:
    alive = sum(1 for node in ray.nodes() if node["Alive"])
    if alive >= int(sys.argv[2]) or time.monotonic() > deadline:
        break
    time.sleep(0.5)
ray.shutdown()
print(alive)
"""


def _alive_nodes(address: str, want: int = 1, timeout: float = 0.0) -> int:
    """How many nodes the cluster reports alive, read by a driver of its own (in a child process, so this
    process stays unconnected); waits up to ``timeout`` seconds for ``want`` of them."""
    counted = subprocess.run([sys.executable, "-c", _COUNT_NODES, address, str(want), str(timeout)],
                             capture_output=True, text=True, timeout=timeout + 120, env={**os.environ, **NODE_ENV})
    lines = counted.stdout.split()
    return int(lines[-1]) if counted.returncode == 0 and lines else 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head and a second node, as separate `ray start` processes with one CPU each."""
    if ray.is_initialized():
        ray.shutdown()
    logs = tmp_path_factory.mktemp("ray_logs")
    made = subprocess.run([_ray_cli(), "get-auth-token", "--generate"], capture_output=True, text=True, timeout=60)
    if made.returncode != 0:  # creates ~/.ray/auth_token only where there is none
        pytest.fail(f"ray get-auth-token --generate failed: {made.stderr[-1000:]}")
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # Ray's socket paths must stay short
    port = free_port()
    address = f"127.0.0.1:{port}"
    head = _start(["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}"], logs / "head.log")
    nodes = [head]
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:  # the head's GCS accepts connections
            try:
                check_reachable(address, 2.0)
                break
            except Exception:  # noqa: BLE001 - ConfigError until the port opens
                if head.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the Ray head did not start: {(logs / 'head.log').read_text()[-2000:]}")
                time.sleep(0.5)
        nodes.append(_start([f"--address={address}"], logs / "node.log"))
        if _alive_nodes(address, want=2, timeout=max(deadline - time.monotonic(), 1.0)) < 2:
            pytest.fail(f"the second Ray node did not join: {(logs / 'node.log').read_text()[-2000:]}")
        yield address
    finally:
        for node in reversed(nodes):
            _stop(node)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_sample(tmp_path_factory.mktemp("ray_cluster_corpus") / "corpus.jsonl", 24)


def test_a_build_joins_a_two_node_cluster_and_writes_the_local_build_s_bytes(cluster, corpus, tmp_path):
    local = tmp_path / "local"
    config = BuildConfig(trees=("similarity",)).with_overrides(tree={"levels": 3}, clustering=SAMPLED).validate()
    build_index(corpus, local, config, show_progress=False)

    out = tmp_path / "cluster"
    # the build is its own process, as a user runs it: its Ray driver starts in the nodes' authentication mode
    built = subprocess.run([sys.executable, "-m", "sirerag", "build", str(corpus), "--out", str(out), "--trees",
                            "similarity", "--engine", "ray", "--ray-address", cluster, "--config",
                            str(_engine_toml(tmp_path))], capture_output=True, text=True, timeout=600,
                           env={**os.environ, **NODE_ENV})
    assert built.returncode == 0, built.stderr[-3000:]
    assert f"joined the Ray cluster at {cluster}" in built.stderr
    assert "assigning 10 rows in 1 blocks on the ray engine" in built.stderr  # 42 leaves, a sample of 32
    for name in FILES:
        assert (out / name).read_bytes() == (local / name).read_bytes(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["engine"]["name"] == "ray"
    assert manifest["config"]["engine"]["address"] == cluster
    assert not ray.is_initialized()  # the build disconnected; the cluster keeps running
    assert _alive_nodes(cluster, want=2) == 2


def _engine_toml(folder: Path) -> Path:
    """Two actors of one CPU each: on two one-CPU nodes, Ray must place one on each."""
    path = folder / "engine.toml"
    sampled = "".join(f"{key} = {value}\n" for key, value in SAMPLED.items())
    path.write_text(f"[tree]\nlevels = 3\n\n[clustering]\n{sampled}\n[engine]\nactors = 2\nactor_num_cpus = 1\n",
                    encoding="utf-8")
    return path
