"""Embedding levers of the build's cost, on one set of texts: speed of each encoder and its cosine with MiniLM.

Encoders: ``torch`` (MiniLM on torch, ``--precision``), ``ort`` (the ONNX export the build uses for queries and
short texts, float32, every core), ``ort-int8`` (that export dynamically quantised to int8 weights with ONNX
Runtime's ``quantize_dynamic``, written once into ``--work``), ``static`` (the model2vec embedder distilled from
MiniLM, :mod:`sirerag.embedding.static`). Texts: the first ``--limit`` passages of a corpus as a passage-mode
build embeds them, or with ``--index`` an index's propositions, aggregates and entity names as well.

    python -m benchmarks.bench_levers ../shared/bench/2wikimultihopqa/corpus.jsonl --limit 1000 --work DIR \\
        --encoders torch,ort,ort-int8 --json F
    python -m benchmarks.bench_levers CORPUS --index IDX --kinds names,propositions --encoders ort,static
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

from benchmarks.harness import Report, Timer, add_json_argument
from sirerag.core.config import ChunkingConfig
from sirerag.core.io.files import read_jsonl
from sirerag.corpus.load import load_corpus
from sirerag.text.chunking import chunk_documents

ENCODERS = ("torch", "ort", "ort-int8", "static")


def texts_of(corpus: str, limit: int, index: str | None, kinds: list[str]) -> dict[str, list[str]]:
    """The texts of each kind: ``passages`` (first ``limit`` of the corpus), ``propositions``, ``aggregates`` (the
    relatedness tree's level 0: every aggregate) and ``names`` (of ``index``)."""
    out: dict[str, list[str]] = {}
    if "passages" in kinds:
        documents = load_corpus(corpus)[:limit] if limit else load_corpus(corpus)
        out["passages"] = [c.text for c in chunk_documents(documents, ChunkingConfig(mode="passage"))]
    if index is not None and "propositions" in kinds:
        rows = read_jsonl(Path(index) / "propositions.jsonl")
        out["propositions"] = list(dict.fromkeys(" ".join(row["text"].split()) for row in rows))
    if index is not None and "aggregates" in kinds:
        out["aggregates"] = [row["text"] for row in read_jsonl(Path(index) / "entries.jsonl")
                             if row["kind"] == "aggregate"]
    if index is not None and "names" in kinds:
        graph = Path(index) / "graph"
        counts = np.load(graph / "entity_passages.npy", allow_pickle=False)
        out["names"] = json.loads((graph / "node_names.json").read_text(encoding="utf-8"))[:len(counts)]
    return out


def int8_export(work: Path) -> Path:
    """The ONNX query export of MiniLM with its weights quantised to int8 (dynamic activations), in ``work``."""
    import shutil

    from onnxruntime.quantization import QuantType, quantize_dynamic

    from sirerag.embedding.query_encoder import MODEL_FILE, export_info, query_model_dir
    from sirerag.embedding.query_export import ensure_minilm_query_export

    key = ensure_minilm_query_export()["key"]
    source = query_model_dir(key)
    target = work / f"ort-int8-{key}"
    if export_info(target) is not None:
        return target
    tmp = work / f"ort-int8-{key}.part"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, ignore=shutil.ignore_patterns(MODEL_FILE, MODEL_FILE + ".data"))
    quantize_dynamic(str(source / MODEL_FILE), str(tmp / MODEL_FILE), weight_type=QuantType.QInt8,
                     per_channel=True)
    tmp.rename(target)
    return target


def encoder(name: str, *, work: Path, precision: str, threads: int) -> Callable[[list[str]], np.ndarray]:
    """The encoding function of one encoder."""
    if name == "torch":
        from sirerag.embedding import load_embedder

        return load_embedder("minilm", precision=precision, show_progress=False).encode_documents
    if name in ("ort", "ort-int8"):
        from sirerag.embedding.query_encoder import OnnxQueryEmbedder, query_model_dir
        from sirerag.embedding.query_export import ensure_minilm_query_export

        folder = query_model_dir(ensure_minilm_query_export()["key"]) if name == "ort" else int8_export(work)
        return OnnxQueryEmbedder(folder, name, threads=threads).encode_documents
    if name == "static":
        from sirerag.embedding.static import load_minilm_static

        return load_minilm_static().encode_documents
    raise SystemExit(f"--encoders: unknown encoder {name!r} (one of {', '.join(ENCODERS)})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("--limit", type=int, default=1000, help="first passages of the corpus (0 = all)")
    ap.add_argument("--index", help="an index built from the corpus: its propositions, aggregates and entity names")
    ap.add_argument("--kinds", default="passages", help="comma list of passages, propositions, aggregates, names")
    ap.add_argument("--encoders", default="torch,ort,ort-int8", help=f"comma list of {', '.join(ENCODERS)}")
    ap.add_argument("--reference", default="ort", help="encoder the cosines are taken against (float32 MiniLM)")
    ap.add_argument("--precision", default="auto", choices=("auto", "float32", "bfloat16"), help="for torch")
    ap.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    ap.add_argument("--work", required=True, help="folder for the int8 export")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    report = Report("bench_levers", argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    texts = texts_of(args.corpus, args.limit, args.index, args.kinds.split(","))
    names = args.encoders.split(",")
    results: dict[str, Any] = {}
    vectors: dict[tuple[str, str], np.ndarray] = {}
    for name in dict.fromkeys([args.reference, *names]):
        with Timer() as load:
            encode = encoder(name, work=work, precision=args.precision, threads=args.threads)
            encode(["warm up"])
        results[name] = {"load": load.to_dict(ndigits=2)}
        for kind, items in texts.items():
            with Timer() as timer:
                vectors[name, kind] = encode(items)
            results[name][kind] = {"texts": len(items), **timer.to_dict(ndigits=2),
                                   "texts_per_s": round(len(items) / max(timer.wall_s, 1e-9), 1)}
    for name in names:
        for kind in texts:
            cos = (vectors[name, kind] * vectors[args.reference, kind]).sum(axis=1)
            results[name][kind]["cosine_with_reference"] = {"min": round(float(cos.min()), 5),
                                                            "p1": round(float(np.sort(cos)[len(cos) // 100]), 5),
                                                            "mean": round(float(cos.mean()), 5)}
    report.results.update({"texts": {k: len(v) for k, v in texts.items()}, "reference": args.reference,
                           "encoders": results})
    report.write(args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
