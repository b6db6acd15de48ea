"""Measure embedding throughput (passages per second) and peak memory.

Example::

    python -m benchmarks.bench_embedding /work/shared/bench/2wikimultihopqa/corpus.jsonl \
        --sample 2000 --batch-size 64
    python -m benchmarks.bench_embedding CORPUS --precision bfloat16 --parity-with minilm  # speed and parity

Texts are the corpus passages as the build embeds them (``passage`` mode: the
title line and the text); ``--mode tokens`` embeds 100-token chunks instead. The
embedder is loaded and warmed up before the clock starts; no cache is used.
"""
from __future__ import annotations

import argparse
import random
import sys

from benchmarks.harness import Report, Timer, add_json_argument, percentiles, peak_rss_mib
from sirerag.core.config import ChunkingConfig
from sirerag.corpus.load import load_corpus
from sirerag.embedding import load_embedder
from sirerag.text.chunking import chunk_documents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", help="corpus file or folder (.jsonl, .json, folder of .txt/.md)")
    parser.add_argument("--sample", type=int, default=2000, help="passages to embed (random sample; 0 = all)")
    parser.add_argument("--batch-size", type=int, default=64, help="texts per forward pass")
    parser.add_argument("--spec", default="minilm", help="embedder spec (default: minilm)")
    parser.add_argument("--mode", choices=("passage", "tokens"), default="passage", help="chunking mode")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs; the best is reported")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--precision", choices=("auto", "float32", "bfloat16"), default="float32",
                        help="what a torch embedder computes in (default float32; the build's default is auto)")
    parser.add_argument("--parity-with", metavar="SPEC",
                        help="also embed the texts with SPEC (in float32) and report the cosine of each pair of rows")
    parser.add_argument("--query-runs", type=int, default=30, help="one-query encodings timed for the latency")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    report = Report("bench_embedding", argv)

    documents = load_corpus(args.corpus)
    if 0 < args.sample < len(documents):
        documents = random.Random(args.seed).sample(documents, args.sample)
    chunks = chunk_documents(documents, ChunkingConfig(mode=args.mode))
    texts = [c.text for c in chunks]

    with Timer() as loading:
        embedder = load_embedder(args.spec, batch_size=args.batch_size, show_progress=False,
                                 precision=args.precision)
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    embedder.encode_documents(texts[: min(len(texts), 2 * args.batch_size)])  # warm-up

    best, cpu = float("inf"), float("inf")
    for _ in range(max(1, args.repeats)):
        with Timer() as run:
            vectors = embedder.encode_documents(texts)
        if run.wall_s < best:
            best, cpu = run.wall_s, run.cpu_s

    query = "Who is the father of the director of film Polish-Russian War?"
    embedder.encode_queries([query])
    query_wall, query_cpu = [], []
    for _ in range(args.query_runs):
        with Timer() as one:
            embedder.encode_queries([query])
        query_wall.append(one.wall_s)
        query_cpu.append(one.cpu_s)
    parity = None
    if args.parity_with:
        reference = load_embedder(args.parity_with, batch_size=args.batch_size, show_progress=False)
        cosines = (reference.encode_documents(texts) * vectors).sum(axis=1)
        parity = {"spec": reference.spec, "min_cosine": round(float(cosines.min()), 5),
                  "mean_cosine": round(float(cosines.mean()), 5)}
    threads = None
    if "torch" in sys.modules:
        threads = sys.modules["torch"].get_num_threads()
    result = report.results
    result.update({
        "spec": embedder.spec,
        "corpus": str(args.corpus),
        "mode": args.mode,
        "texts": len(texts),
        "mean_tokens_cl100k": round(sum(c.n_tokens for c in chunks) / max(1, len(chunks)), 1),
        "batch_size": args.batch_size,
        "torch_threads": threads,
        "load_seconds": round(loading.wall_s, 2),
        "encode_seconds": round(best, 2),
        "passages_per_second": round(len(texts) / best, 1),
        # CPU seconds of this process: robust to other jobs on the machine
        "cpu_seconds": round(cpu, 2),
        "passages_per_cpu_second": round(len(texts) / cpu, 1),
        "peak_rss_mib": peak_rss_mib(),
        "shape": list(vectors.shape),
        "one_query_ms": percentiles(query_wall, unit="ms", ndigits=1)["mean_ms"],
        "one_query_cpu_ms": percentiles(query_cpu, unit="ms", ndigits=1)["mean_ms"],
        "one_query_latency": percentiles(query_wall, unit="ms", ndigits=1),
        "parity": parity,
    })
    print(f"{result['passages_per_second']} passages/s ({len(texts)} texts in {result['encode_seconds']} s "
          f"wall, {result['cpu_seconds']} s CPU; batch {args.batch_size}, {threads} torch threads); "
          f"peak RSS {result['peak_rss_mib']} MiB")
    report.write(args.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
