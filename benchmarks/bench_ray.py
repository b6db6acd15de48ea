"""Embed the same passages with the local engine and with the Ray engine; print wall and CPU times.

    python -m benchmarks.bench_ray [CORPUS] [--limit 5000] [--actors 2] [--num-cpus 2] [--json OUT]

CORPUS defaults to the 2WikiMultiHopQA corpus of ../shared/bench (relative to the repository).
Each engine embeds the first ``--limit`` passages (title + text, as a passage-mode build does)
into a fresh embedding cache, through the same code path as a build (``CachedEmbedder`` with the
engine); the Ray run starts a local Ray instance first (timed apart). Both must give the same
float32 bytes. CPU seconds are this process's (the driver's): the Ray actors' CPU is not
counted, so compare wall times, and report the machine load (printed) with any figure.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
from pathlib import Path

from benchmarks.harness import Report, Timer, add_json_argument

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / ".." / "shared" / "bench" / "2wikimultihopqa" / "corpus.jsonl"


def passages(path: Path, limit: int) -> list[str]:
    out = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            out.append(f"{row.get('title', '')}\n{row['text']}".strip())
            if len(out) >= limit:
                break
    return out


def embed(texts: list[str], engine, batch_size: int):  # noqa: ANN001, ANN201
    from sirerag.embedding import load_embedder
    from sirerag.embedding.cache import CachedEmbedder

    with tempfile.TemporaryDirectory() as cache:
        embedder = load_embedder("minilm", batch_size=batch_size, cache_dir=cache, show_progress=False,
                                 engine=engine)
        with Timer() as timer:
            vectors = embedder.encode_documents(texts)
        result = {"wall_s": round(timer.wall_s, 2), "driver_cpu_s": round(timer.cpu_s, 2)}
        assert isinstance(embedder, CachedEmbedder)
        embedder.cache.close()
    result["texts_per_s"] = round(len(texts) / result["wall_s"], 1)
    return vectors, result


class EchoServer:
    """A chat-completions endpoint on 127.0.0.1 that answers at once (echoing the prompt), so the
    LLM figures are the engine's own cost per call, not a model's."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                reply = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                        "role": "assistant", "content": body["messages"][-1]["content"]}}],
                                    "usage": {"prompt_tokens": 8, "completion_tokens": 8, "total_tokens": 16}})
                data = reply.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def llm_calls(n: int, url: str, engine) -> dict:  # noqa: ANN001
    from sirerag.llm.base import LLMRequest
    from sirerag.llm.cache import CachedLLM
    from sirerag.llm.factory import load_llm

    requests = [LLMRequest(messages=(("user", f"request {i}"),), max_tokens=8) for i in range(n)]
    with tempfile.TemporaryDirectory() as cache:
        llm = load_llm(f"openai:echo@{url}", cache_dir=cache, engine=engine)
        with Timer() as timer:
            answers = llm.complete_many(requests)
        result = {"calls": n, "wall_s": round(timer.wall_s, 2), "driver_cpu_s": round(timer.cpu_s, 2)}
        assert isinstance(llm, CachedLLM)
        llm.cache.close()
    assert [a.text for a in answers] == [f"request {i}" for i in range(n)]
    result["calls_per_s"] = round(n / result["wall_s"], 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", default=str(DEFAULT))
    parser.add_argument("--limit", type=int, default=5000)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="torch threads of the local run (0: torch's choice)")
    parser.add_argument("--llm-calls", type=int, default=2000, help="calls to an instant echo server (0: skip)")
    add_json_argument(parser)
    args = parser.parse_args()
    harness_report = Report("bench_ray")
    logging.basicConfig(level=logging.WARNING)

    from sirerag.core.config import EngineConfig
    from sirerag.engine import LocalEngine, make_engine

    texts = passages(Path(args.corpus), args.limit)
    report = harness_report.results
    report.update({"corpus": str(args.corpus), "passages": len(texts)})
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    local_vectors, report["local"] = embed(texts, LocalEngine(), args.batch_size)
    report["local"]["load_after"] = os.getloadavg()
    server = EchoServer() if args.llm_calls else None
    if server is not None:
        report["llm_local"] = llm_calls(args.llm_calls, server.url, None)

    with Timer() as starting:
        engine = make_engine(EngineConfig(name="ray", num_cpus=args.num_cpus, actors=args.actors))
    report["ray_start_s"] = round(starting.wall_s, 2)
    try:
        ray_vectors, report["ray"] = embed(texts, engine, args.batch_size)
        # a second, tiny job: what a stage pays before its first batch (actor start + model load)
        _, report["ray_one_block"] = embed(texts[:16], engine, args.batch_size)
        if server is not None:
            report["llm_ray"] = llm_calls(args.llm_calls, server.url, engine)
    finally:
        engine.close()
    report["ray"]["load_after"] = os.getloadavg()
    report["ray"]["actors"] = args.actors
    report["identical_bytes"] = bool(local_vectors.tobytes() == ray_vectors.tobytes())
    report["overhead_vs_local"] = round(report["ray"]["wall_s"] / report["local"]["wall_s"], 2)
    harness_report.write(args.json_out)


if __name__ == "__main__":
    main()
