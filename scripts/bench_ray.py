"""Embed the same passages with the local engine and with the Ray engine; print wall and CPU times.

    python scripts/bench_ray.py [CORPUS] [--limit 5000] [--actors 2] [--num-cpus 2] [--json OUT]

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
import time
from pathlib import Path

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

    with tempfile.TemporaryDirectory() as cache:
        embedder = load_embedder("minilm", batch_size=batch_size, cache_dir=cache, show_progress=False,
                                 engine=engine)
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = embedder.encode_documents(texts)
        result = {"wall_s": round(time.perf_counter() - wall, 2), "driver_cpu_s": round(time.process_time() - cpu, 2)}
        embedder.cache.close()
    result["texts_per_s"] = round(len(texts) / result["wall_s"], 1)
    return vectors, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", default=str(DEFAULT))
    parser.add_argument("--limit", type=int, default=5000)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="torch threads of the local run (0: torch's choice)")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from sirerag.config import EngineConfig
    from sirerag.engine import LocalEngine, make_engine

    texts = passages(Path(args.corpus), args.limit)
    report: dict = {"corpus": str(args.corpus), "passages": len(texts), "load_before": os.getloadavg()}
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    local_vectors, report["local"] = embed(texts, LocalEngine(), args.batch_size)
    report["local"]["load_after"] = os.getloadavg()

    start = time.perf_counter()
    engine = make_engine(EngineConfig(name="ray", num_cpus=args.num_cpus, actors=args.actors))
    report["ray_start_s"] = round(time.perf_counter() - start, 2)
    try:
        ray_vectors, report["ray"] = embed(texts, engine, args.batch_size)
        # a second, tiny job: what a stage pays before its first batch (actor start + model load)
        _, report["ray_one_block"] = embed(texts[:16], engine, args.batch_size)
    finally:
        engine.close()
    report["ray"]["load_after"] = os.getloadavg()
    report["ray"]["actors"] = args.actors
    report["identical_bytes"] = bool(local_vectors.tobytes() == ray_vectors.tobytes())
    report["overhead_vs_local"] = round(report["ray"]["wall_s"] / report["local"]["wall_s"], 2)
    print(json.dumps(report, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
