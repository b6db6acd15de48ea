"""Profile one full offline ``sirerag build`` stage by stage, in this (fresh) process.

Example::

    python -m benchmarks.bench_build ../shared/bench/2wikimultihopqa/corpus.jsonl --out /tmp/2wiki \
        --json build_2wiki.json -- --graph

Arguments after ``--`` go to ``sirerag build``: they are parsed by the CLI's parser and the
build gets the CLI's process setup (numba's on-disk cache), then runs through ``build_index``
with an ``on_stage`` hook. Recorded per stage of the build plan (from the stage's start event
to its end; a model is loaded in the first stage that uses it), and for ``setup`` (imports,
numba set-up, up to the first stage) and ``finish`` (the manifest and the commit):

- ``wall_s``, ``cpu_s`` (this process, every thread) and ``children_cpu_s``;
- ``numba_compile_cpu_s`` (outermost compilations only);
- ``texts_embedded`` (texts the embedding cache sent to the model; cache hits are not counted),
  with ``embed_wall_s``, ``embed_cpu_s`` and ``texts_per_s``;
- ``tokens_embedded``: the tokens the model actually sees, counted with the embedder's own tokenizer
  (special tokens included) and cut at its ``max_seq_length`` as sentence-transformers truncates;
  ``tokens_untruncated`` is the same count without the cut and ``texts_truncated`` the texts that
  lost tokens to it. Embedders without a tokenizer (an OpenAI-compatible API) report ``null``;
- ``peak_rss_mib`` so far.

Counting tokens runs the tokenizer once more over each embedded text; that time is measured and taken
out of the stage's figures (``token_count_s`` in ``total`` says how much it was). ``--numba-cache DIR``
uses DIR as numba's cache (an empty one measures a first run); run the benchmark twice for the
second-run cost.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import Mark, Report, add_json_argument, peak_rss_mib

_COUNTERS = ("compile", "embedded", "embed_wall", "embed_cpu", "tokens", "untruncated", "truncated",
             "count_wall", "count_cpu")


class Probe:
    """Counts numba compilations and embedded texts and tokens, and records the build's stages from its
    ``on_stage`` events."""

    def __init__(self) -> None:
        self.totals = dict.fromkeys(_COUNTERS, 0.0)
        self.compiles = 0
        self.tokenized = True  # False once an embedder without a tokenizer has embedded something
        self.stages: list[dict[str, Any]] = []
        self._start = self._mark()

    def _mark(self) -> tuple[Mark, dict[str, float]]:
        return Mark.now(), dict(self.totals)

    def cut(self, name: str) -> None:
        """Record the interval since the last cut as ``name``."""
        now = self._mark()
        self.stages.append({"stage": name, **self._delta(self._start, now)})
        self._start = now

    def on_stage(self, name: str, event: str, seconds: float) -> None:
        """The build's stage hook: the time before a stage starts goes to ``setup`` (or is dropped
        between stages, where the build does nothing of note); a stage is recorded when it ends."""
        if event == "start":
            if not self.stages:
                self.cut("setup")
            self._start = self._mark()
        else:
            self.cut(name)

    def _delta(self, a: tuple[Mark, dict[str, float]], b: tuple[Mark, dict[str, float]]) -> dict[str, Any]:
        d = {k: b[1][k] - a[1][k] for k in _COUNTERS}
        span = b[0].since(a[0], ndigits=None)
        embedded = int(d["embedded"])
        return {"wall_s": round(span["wall_s"] - d["count_wall"], 2), "cpu_s": round(span["cpu_s"] - d["count_cpu"], 2),
                "children_cpu_s": round(span["children_cpu_s"], 2),
                "numba_compile_cpu_s": round(d["compile"], 2), "texts_embedded": embedded,
                "embed_wall_s": round(d["embed_wall"], 2), "embed_cpu_s": round(d["embed_cpu"], 2),
                "texts_per_s": round(embedded / d["embed_wall"], 1) if embedded and d["embed_wall"] > 0 else None,
                **self._tokens(d), "peak_rss_mib": peak_rss_mib()}

    def _tokens(self, d: dict[str, float]) -> dict[str, Any]:
        if not self.tokenized:
            return {"tokens_embedded": None, "tokens_untruncated": None, "texts_truncated": None}
        return {"tokens_embedded": int(d["tokens"]), "tokens_untruncated": int(d["untruncated"]),
                "texts_truncated": int(d["truncated"])}

    def total(self, start: Mark) -> dict[str, Any]:
        row = self._delta((start, dict.fromkeys(_COUNTERS, 0.0)), self._mark())
        row.update(numba_compilations=self.compiles, token_count_s=round(self.totals["count_wall"], 2))
        return row

    def count_tokens(self, inner: Any, texts: list[str]) -> None:
        """Add the tokens ``inner`` (the cache's embedder) feeds its model for ``texts``."""
        model = getattr(inner, "model", None)
        tokenizer, limit = getattr(model, "tokenizer", None), getattr(model, "max_seq_length", None)
        if tokenizer is None or not limit:
            self.tokenized = False
            return
        start = Mark.now()
        lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=True, verbose=False)["input_ids"]]
        self.totals["tokens"] += sum(min(n, limit) for n in lengths)
        self.totals["untruncated"] += sum(lengths)
        self.totals["truncated"] += sum(n > limit for n in lengths)
        span = Mark.now().since(start, ndigits=None)
        self.totals["count_wall"] += span["wall_s"]
        self.totals["count_cpu"] += span["cpu_s"]

    def compile_listener(self) -> Any:
        """A numba event listener adding the CPU time of outermost compilations to this probe."""
        import numba.core.event as numba_events

        probe = self

        class CompileTimer(numba_events.Listener):
            depth = 0
            started: Mark | None = None

            def on_start(self, event: Any) -> None:
                if self.depth == 0:
                    self.started = Mark.now()
                self.depth += 1

            def on_end(self, event: Any) -> None:
                self.depth -= 1
                if self.depth == 0 and self.started is not None:
                    probe.totals["compile"] += Mark.now().since(self.started, ndigits=None)["cpu_s"]
                    probe.compiles += 1

        return CompileTimer()


def _count_embeddings(probe: Probe) -> None:
    """Wrap the embedding cache's encoder of missing texts to count texts, tokens and time."""
    from sirerag.embedding.cache import CachedEmbedder

    original = CachedEmbedder._encode_missing

    def counted(self: Any, items: list, side: str, *rest: Any) -> Any:
        start = Mark.now()
        try:
            return original(self, items, side, *rest)
        finally:
            span = Mark.now().since(start, ndigits=None)
            probe.totals["embedded"] += len(items)
            probe.totals["embed_wall"] += span["wall_s"]
            probe.totals["embed_cpu"] += span["cpu_s"]
            probe.count_tokens(self.inner, [text for _, text in items])

    # the probe replaces the method in this process only, taking the same arguments (hence the ignore)
    CachedEmbedder._encode_missing = counted  # type: ignore[method-assign,assignment]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", help="corpus file or folder")
    parser.add_argument("--out", required=True, help="index directory to write")
    parser.add_argument("--cache", help="cache folder for model calls (default OUT/cache: cold embeddings)")
    parser.add_argument("--numba-cache", help="numba cache folder (default: the CLI's, ~/.cache/sirerag/numba)")
    add_json_argument(parser)
    args = parser.parse_args(own)
    if args.numba_cache:
        os.environ["NUMBA_CACHE_DIR"] = str(Path(args.numba_cache).resolve())

    report = Report("bench_build", argv)
    start = Mark.now()
    probe = Probe()
    import numba.core.event as numba_events

    numba_events.register("numba:compile", probe.compile_listener())
    _count_embeddings(probe)
    from sirerag.cli.build import config_from_args
    from sirerag.cli.main import build_parser
    from sirerag.cli.numba_cache import cache_umap_functions, configure_numba_cache
    from sirerag.core.io import read_manifest
    from sirerag.pipeline.build import build_index

    command = ["build", args.corpus, "--out", args.out, "--quiet", *extra]
    if args.cache:
        command += ["--cache", args.cache]
    build_args = build_parser().parse_args(command)
    config = config_from_args(build_args)
    configure_numba_cache()  # the CLI's process setup
    if config.trees:
        cache_umap_functions()
    build_index(Path(args.corpus), Path(args.out), config, cache_dir=build_args.cache, show_progress=False,
                on_stage=probe.on_stage)
    probe.cut("finish")
    manifest = read_manifest(args.out)
    report.results.update({
        "corpus": args.corpus, "build_command": ["sirerag", *command], "returncode": 0,
        "numba_cache_dir": os.environ.get("NUMBA_CACHE_DIR"), "total": probe.total(start), "stages": probe.stages,
        "build_timings": manifest.timings, "counts": manifest.counts.to_dict(),
        "embedder": manifest.embedder.to_dict() if manifest.embedder is not None else None})
    report.write(args.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
