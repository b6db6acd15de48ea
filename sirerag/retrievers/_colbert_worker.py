"""Child process that runs colbert-ai away from the caller's process.

colbert-ai changes the multiprocessing start method when imported, prints to
stdout, compiles C++ extensions on first use and, when a step crashes, can leave
its parent waiting forever. :mod:`sirerag.retrievers._colbert_client` therefore
starts this module as ``python -m sirerag.retrievers._colbert_worker`` and talks
to it over pipes, under a timeout.

Protocol: one JSON request per line on stdin (``{"op": ..., "args": {...}}``);
one JSON reply per line on the *original* stdout (``{"ok": true, "result": ...}``
or ``{"ok": false, "error": ..., "traceback": ...}``). File descriptor 1 is
pointed at stderr before colbert is imported, so nothing it prints can corrupt
the replies. The worker exits at end of input.

``python -m sirerag.retrievers._colbert_worker --compile-extensions`` compiles
colbert-ai's four CPU extensions in parallel and exits.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

logger = logging.getLogger(__name__)

#: colbert-ai's CPU extensions: (name, source file relative to the colbert package).
#: The flags must match colbert-ai's own ``load`` calls so that it reuses the build.
EXTENSIONS = (
    ("segmented_maxsim_cpp", "modeling/segmented_maxsim.cpp"),
    ("segmented_lookup_cpp", "search/segmented_lookup.cpp"),
    ("filter_pids_cpp", "search/filter_pids.cpp"),
    ("decompress_residuals_cpp", "search/decompress_residuals.cpp"),
)


def read_collection(path: str) -> list[str]:
    """Texts of a ``pid<TAB>text`` file, checking that pids run 0, 1, 2, ..."""
    texts: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh):
            pid, _, text = line.rstrip("\n").partition("\t")
            if int(pid) != lineno:
                raise ValueError(f"{path}:{lineno + 1}: expected pid {lineno}, got {pid!r}")
            texts.append(text)
    return texts


def _run_config(root: str) -> Any:
    from colbert.infra import RunConfig

    # one process, no fork: colbert's own launcher hangs its parent when a child crashes
    return RunConfig(nranks=1, avoid_fork_if_possible=True, root=root, experiment="sirerag", index_root=root)


def op_build(state: dict[str, Any], *, checkpoint: str, collection: str, out: str, name: str,
             nbits: int, doc_maxlen: int, kmeans_niters: int) -> dict[str, Any]:
    """Index ``collection`` into ``out/name`` with colbert-ai's PLAID indexer."""
    from colbert import Indexer
    from colbert.infra import ColBERTConfig, Run
    from transformers import AutoTokenizer

    texts = read_collection(collection)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    # +1 for ColBERT's [D] marker token
    lengths = [len(ids) + 1 for ids in tokenizer(texts, add_special_tokens=True)["input_ids"]]
    with Run().context(_run_config(out)):
        config = ColBERTConfig(nbits=nbits, doc_maxlen=doc_maxlen, kmeans_niters=kmeans_niters,
                               avoid_fork_if_possible=True)
        indexer = Indexer(checkpoint=checkpoint, config=config, verbose=1)
        indexer.index(name=name, collection=texts, overwrite=False)
    meta = json.loads((Path(out) / name / "metadata.json").read_text(encoding="utf-8"))
    return {
        "passages": len(texts),
        "embeddings": int(meta.get("num_embeddings", 0)),
        "partitions": int(meta.get("num_partitions", 0)),
        "truncated": sum(n > doc_maxlen for n in lengths),
        "max_tokens": max(lengths, default=0),
    }


def op_open(state: dict[str, Any], *, checkpoint: str, collection: str, root: str, name: str,
            query_maxlen: int | None) -> dict[str, Any]:
    """Load a built index for searching; it stays open until the worker exits."""
    from colbert import Searcher
    from colbert.infra import ColBERTConfig, Run

    texts = read_collection(collection)
    context = Run().context(_run_config(root))
    context.__enter__()  # kept open for the worker's lifetime
    overrides = {"query_maxlen": query_maxlen} if query_maxlen else {}
    searcher = Searcher(index=name, index_root=root, checkpoint=checkpoint, collection=texts,
                        config=ColBERTConfig(**overrides), verbose=1)
    state["searcher"] = searcher
    return {"passages": len(texts), "query_maxlen": int(searcher.config.query_maxlen)}


def search_params(k: int) -> dict[str, Any]:
    """PLAID's candidate-generation settings for a depth ``k`` (colbert-ai's own defaults)."""
    if k <= 10:
        return {"ncells": 1, "centroid_score_threshold": 0.5, "ndocs": 256}
    if k <= 100:
        return {"ncells": 2, "centroid_score_threshold": 0.45, "ndocs": 1024}
    return {"ncells": 4, "centroid_score_threshold": 0.4, "ndocs": max(k * 4, 4096)}


def op_search(state: dict[str, Any], *, queries: list[str], k: int) -> list[list[list[float]]]:
    """Top ``k`` ``[pid, score]`` pairs per query, best first."""
    searcher = state.get("searcher")
    if searcher is None:
        raise RuntimeError("search before open")
    # colbert-ai fixes these on the first search; set them for each depth instead
    searcher.configure(**search_params(k))
    encoded = searcher.encode(queries)
    out = []
    for i in range(len(queries)):
        pids, _ranks, scores = searcher.dense_search(encoded[i : i + 1], k)
        out.append([[int(p), float(s)] for p, s in zip(pids, scores)])
    return out


OPS: dict[str, Callable[..., Any]] = {"build": op_build, "open": op_open, "search": op_search}


def compile_extensions() -> int:
    """Compile the CPU extensions in parallel (one process each); returns an exit code."""
    import importlib.util
    import subprocess

    spec = importlib.util.find_spec("colbert")
    if spec is None or not spec.submodule_search_locations:
        logger.error("colbert-ai is not installed")
        return 1
    package = Path(list(spec.submodule_search_locations)[0])
    code = ("import sys; from torch.utils.cpp_extension import load; "
            "load(name=sys.argv[1], sources=[sys.argv[2]], extra_cflags=['-O3'])")
    procs = [subprocess.Popen([sys.executable, "-c", code, name, str(package / source)])
             for name, source in EXTENSIONS]
    return max(p.wait() for p in procs)


def describe(exc: BaseException) -> str:
    """``Type: message``, or for a bare ``assert`` the file, line and source that failed."""
    if str(exc):
        return f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return type(exc).__name__
    last = frames[-1]
    where = "/".join(Path(last.filename).parts[-3:])
    return f"{type(exc).__name__} at {where}:{last.lineno}: {(last.line or '').strip()}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--compile-extensions"]:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")  # a process entry point
        return compile_extensions()
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # whatever colbert prints (Python or C++) goes to stderr
    sys.stdout = sys.stderr
    state: dict[str, Any] = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            reply = {"ok": True, "result": OPS[request["op"]](state, **request.get("args", {}))}
        except Exception as exc:  # reported to the parent, which raises it
            reply = {"ok": False, "error": describe(exc), "traceback": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
