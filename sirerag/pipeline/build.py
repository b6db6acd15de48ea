"""The index build: walk the build plan and write the index directory.

corpus -> chunks -> leaf embeddings -> similarity tree -> (extraction ->
relatedness tree) -> pool -> BM25 -> (entity graph) -> index directory: the stages of
:class:`~sirerag.pipeline.plan.BuildPlan`, run by :class:`~sirerag.pipeline.stages.BuildRunner`.

Every model call goes through the on-disk caches under ``cache_dir`` (by default
``<out>/cache``), so a killed build resumes and pays only for what is missing.
The index files are written into a staging folder beside ``out`` that replaces it in
one swap, under ``out``'s write lock (:func:`sirerag.core.io.staging.staged_index`); the
default cache stays in ``out`` during the build and moves into the new index at the swap.
"""
from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from sirerag.core.config import BuildConfig
from sirerag.core.io.guard import check_index_out
from sirerag.core.io.staging import staged_index
from sirerag.pipeline.endpoints import EMBEDDER_OPTION, EXTRACTOR_OPTION, LLM_OPTION, check_endpoints
from sirerag.pipeline.models import Models, cache_folder, kept_folders
from sirerag.pipeline.plan import BuildPlan, StageHook
from sirerag.pipeline.stages import BuildRunner
from sirerag.core.types import Document

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuildReport:
    """What a build did: counts, timings (seconds) and the components it used."""

    out: Path
    counts: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    components: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {"out": str(self.out), "counts": self.counts, "timings": self.timings, "components": self.components}


def build_index(
    corpus: str | Path | Sequence[Document],
    out: str | Path,
    config: BuildConfig | None = None,
    *,
    cache_dir: str | Path | None = None,
    show_progress: bool = True,
    on_stage: StageHook | None = None,
) -> BuildReport:
    """Build an index directory from a corpus.

    Args:
        corpus: a corpus path (``.jsonl``, ``.json`` or a folder of ``.txt``/``.md``)
            or already-loaded documents.
        out: the index directory to write (created if missing).
        config: build settings; validated before any work starts.
        cache_dir: where LLM and embedding calls are cached (default ``<out>/cache``).
        show_progress: show progress bars on long stages.
        on_stage: called as ``on_stage(stage, "start", 0.0)`` and ``on_stage(stage, "end", seconds)`` around
            every stage of the plan (:class:`~sirerag.pipeline.plan.BuildPlan`).

    Returns:
        A :class:`BuildReport` with counts and stage timings.

    Raises:
        ConfigError: a setting is invalid (nothing is computed), or ``out`` may not be
            replaced (not a sirerag index, holds other files, ``/``, home, current folder).
        IndexLockedError: another process is writing ``out``.
        InputError: the corpus is invalid (the message names file and line).
    """
    from sirerag.engine import make_engine

    config = check_specs((config or BuildConfig()).validate())
    check_loadable(config)  # an LLM that cannot load stops here, before any work (the dry run checks the same)
    out = Path(out)
    inputs = (corpus,) if isinstance(corpus, (str, Path)) else ()
    cache = cache_folder(out, cache_dir)
    keep = kept_folders(out, cache)
    check_index_out(out, keep=keep, inputs=inputs)  # before the endpoints are probed and models load
    check_endpoints(config)
    engine = make_engine(config.engine)  # a Ray address that does not answer stops here
    try:
        with staged_index(out, keep=keep, inputs=inputs) as stage:
            report = _build(corpus, stage, config, cache, show_progress, engine, on_stage)
    finally:
        engine.close()
    logger.info("index written to %s (%d pool entries)", out, report.counts["pool"]["entries"])
    return replace(report, out=out)


def _build(corpus: str | Path | Sequence[Document], out: Path, config: BuildConfig, cache: Path,
           show_progress: bool, engine: Any, on_stage: StageHook | None) -> BuildReport:
    """Walk the build plan with the real stage runner, writing the index files into ``out`` (the staging
    folder)."""
    report = BuildReport(out=out)
    with Models(config, cache, engine=engine, show_progress=show_progress) as models:
        runner = BuildRunner(corpus, out, config, models, show_progress=show_progress)
        try:
            BuildPlan.from_config(config).walk(runner, timings=report.timings, on_stage=runner.meter.hook(on_stage))
        finally:
            runner.meter.close()
        report.counts.update(runner.counts)
        report.components.update(runner.models_record())
        runner.write_manifest(config=config.to_dict(), corpus={"documents": len(runner.documents)},
                              components=runner.components, **report.components, counts=report.counts,
                              timings=report.timings)
    return report


def check_specs(config: BuildConfig) -> BuildConfig:
    """Check the form of the embedder and LLM specs without loading anything, and that an ``st:`` embedder
    can be found (a folder, the Hugging Face cache or the Hub), so a typo stops the build before any work;
    returns ``config``. Raises ``ConfigError`` (``MissingExtraError`` when ``int8`` lacks its packages)."""
    from sirerag.embedding import parse_embedder_spec
    from sirerag.embedding.backends import check_precision
    from sirerag.llm.factory import parse_spec

    backend, rest = parse_embedder_spec(config.embedder.spec, option=EMBEDDER_OPTION)
    check_precision(backend, config.embedder.precision, "embedder.precision")  # bfloat16 is torch's only
    if config.embedder.precision == "int8":
        from sirerag.embedding.query_export import require_int8

        require_int8()  # a missing package stops the build before any work, naming the extra
    for option, spec in ((LLM_OPTION, config.llm.spec), (EXTRACTOR_OPTION, config.extraction.llm)):
        if spec is not None:
            parse_spec(spec, option=option)
    if backend == "st" and importlib.util.find_spec("huggingface_hub") is not None:
        from sirerag.embedding.sentence_transformers import check_model_name

        check_model_name(rest)  # a name that cannot be loaded stops here, naming --embedder
    return config


def check_loadable(config: BuildConfig) -> None:
    """Fail where the build would fail before its first LLM call: every LLM the build loads is checked the
    way loading it checks (an ``hf:`` preset's package, a model or adapter path, the packages of the backend;
    an ``openai:`` client with its key), without loading weights or calling a model.

    Raises:
        ConfigError, MissingExtraError: as the build would.
    """
    from sirerag.core.errors import require
    from sirerag.llm.factory import describe_spec, load_llm, parse_spec

    specs = [config.llm.spec]
    if config.extraction.extractor == "llm" and ("relatedness" in config.trees or config.graph.enabled):
        specs.append(config.extraction.llm or config.llm.spec)
    for spec in dict.fromkeys(s for s in specs if s):
        parsed = parse_spec(spec, option=LLM_OPTION if spec == config.llm.spec else EXTRACTOR_OPTION)
        if parsed.backend == "hf":
            for module in ("torch", "transformers"):
                if importlib.util.find_spec(module) is None:
                    require(module, "local", purpose="local hf: LLMs")
            describe_spec(spec)  # the preset's package, the model and adapter paths
        elif len(parsed.base_urls) <= 1:
            load_llm(spec, config=config.llm)  # the client and its key; no request is sent
