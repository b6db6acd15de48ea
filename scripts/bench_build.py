"""Time one full offline ``sirerag build`` stage by stage, in this (fresh) process.

Example::

    python scripts/bench_build.py ../shared/bench/2wikimultihopqa/corpus.jsonl --out /tmp/2wiki \
        --json build_2wiki.json -- --graph

Arguments after ``--`` go to ``sirerag build``: they are parsed by the CLI's parser and the
build gets the CLI's process setup (numba's on-disk cache), then runs through ``build_index``
with an ``on_stage`` hook. Recorded per stage of the build plan (from the stage's start event
to its end; a model is loaded in the first stage that uses it), and for ``setup`` (imports,
numba set-up, up to the first stage) and ``finish`` (the manifest and the commit): wall and
CPU seconds, peak RSS so far, numba compilation (CPU seconds, outermost compilations only)
and texts embedded with their wall time. ``--numba-cache DIR`` uses DIR as numba's cache (an empty one measures a
first run); run the script twice for the second-run cost.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any


class Probe:
    """Counts numba compilations and embedded texts, and records the build's stages from its
    ``on_stage`` events."""

    def __init__(self) -> None:
        self.compile_cpu = 0.0
        self.compiles = 0
        self.embedded = 0
        self.embed_wall = 0.0
        self.embed_cpu = 0.0
        self.stages: list[dict[str, Any]] = []
        self._start = self._mark()

    def _mark(self) -> dict[str, float]:
        return {"wall": time.perf_counter(), "cpu": time.process_time(), "compile": self.compile_cpu,
                "embedded": self.embedded, "embed_wall": self.embed_wall}

    def cut(self, name: str) -> None:
        """Record the interval since the last cut as ``name``."""
        now = self._mark()
        self.stages.append({"stage": name, **_delta(self._start, now)})
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

    def compile_listener(self) -> Any:
        """A numba event listener adding the CPU time of outermost compilations to this probe."""
        import numba.core.event as numba_events

        probe = self

        class CompileTimer(numba_events.Listener):
            depth, started = 0, 0.0

            def on_start(self, event: Any) -> None:
                if self.depth == 0:
                    self.started = time.process_time()
                self.depth += 1

            def on_end(self, event: Any) -> None:
                self.depth -= 1
                if self.depth == 0:
                    probe.compile_cpu += time.process_time() - self.started
                    probe.compiles += 1

        return CompileTimer()


def _delta(a: dict[str, float], b: dict[str, float]) -> dict[str, Any]:
    embedded = int(b["embedded"] - a["embedded"])
    embed_wall = b["embed_wall"] - a["embed_wall"]
    return {"wall_s": round(b["wall"] - a["wall"], 2), "cpu_s": round(b["cpu"] - a["cpu"], 2),
            "numba_compile_cpu_s": round(b["compile"] - a["compile"], 2), "texts_embedded": embedded,
            "texts_per_s": round(embedded / embed_wall, 1) if embedded and embed_wall > 0 else None,
            "peak_rss_mib": _rss_mib()}


def _rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _count_embeddings(probe: Probe) -> None:
    """Wrap the embedding cache's encoder of missing texts to count texts and time."""
    from sirerag.embedding.cache import CachedEmbedder

    original = CachedEmbedder._encode_missing

    def counted(self: Any, items: list, side: str) -> Any:
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return original(self, items, side)
        finally:
            probe.embedded += len(items)
            probe.embed_wall += time.perf_counter() - start
            probe.embed_cpu += time.process_time() - cpu

    CachedEmbedder._encode_missing = counted  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", help="corpus file or folder")
    parser.add_argument("--out", required=True, help="index directory to write")
    parser.add_argument("--cache", help="cache folder for model calls (default OUT/cache: cold embeddings)")
    parser.add_argument("--numba-cache", help="numba cache folder (default: the CLI's, ~/.cache/sirerag/numba)")
    parser.add_argument("--json", dest="json_out", help="write the measurements here as JSON")
    args = parser.parse_args(argv)
    if args.numba_cache:
        os.environ["NUMBA_CACHE_DIR"] = str(Path(args.numba_cache).resolve())

    start_wall, start_cpu = time.perf_counter(), time.process_time()
    probe = Probe()
    import numba.core.event as numba_events

    numba_events.register("numba:compile", probe.compile_listener())
    _count_embeddings(probe)
    from sirerag.cli.build import config_from_args
    from sirerag.cli.numba_cache import cache_umap_functions, configure_numba_cache
    from sirerag.cli.main import build_parser
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
    rc = 0
    manifest = json.loads((Path(args.out) / "manifest.json").read_text(encoding="utf-8"))
    result = {
        "corpus": args.corpus, "command": ["sirerag", *command], "returncode": rc,
        "load_average": list(os.getloadavg()), "cpus": os.cpu_count(),
        "numba_cache_dir": os.environ.get("NUMBA_CACHE_DIR"),
        "total": {"wall_s": round(time.perf_counter() - start_wall, 2),
                  "cpu_s": round(time.process_time() - start_cpu, 2),
                  "numba_compile_cpu_s": round(probe.compile_cpu, 2), "numba_compilations": probe.compiles,
                  "texts_embedded": probe.embedded, "embed_wall_s": round(probe.embed_wall, 2),
                  "embed_cpu_s": round(probe.embed_cpu, 2),
                  "texts_per_s": round(probe.embedded / probe.embed_wall, 1) if probe.embed_wall else None,
                  "peak_rss_mib": _rss_mib()},
        "stages": probe.stages,
        "build_timings": manifest.get("timings"), "counts": manifest.get("counts"),
        "embedder": manifest.get("embedder"),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n", encoding="utf-8")
    return rc


if __name__ == "__main__":
    sys.exit(main())
