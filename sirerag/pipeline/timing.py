"""The dry run's time estimate: the machine's measured throughput, and the wall time it gives each stage.

* **Embedder**: a short calibration (:data:`CALIBRATION_TEXTS` texts of about :data:`CALIBRATION_WORDS` words,
  after a warm-up batch) gives its tokens per second on this machine. It is cached per machine and model in the user
  cache folder (``$XDG_CACHE_HOME/sirerag/throughput/``, :func:`machine` + the embedder's spec, precision and batch
  size), so only the first dry run on a machine pays for it. An API embedder is not calibrated (that would be paid).
* **LLM endpoint** (an ``openai:`` spec naming a server; OpenAI's own API is paid and not measured): after a
  one-token warm-up, two requests of the same prompt length measured now (the server may have changed): one
  answering a single token gives its prompt tokens per second, one answering :data:`PROBE_OUTPUT_TOKENS` more its
  output tokens per second. A local ``hf:`` model is not loaded by a dry run, so its time is not estimated.

Stage times are estimates for a server that answers one request at a time; clustering (UMAP and the mixtures) and
the embedding cache are not counted. Tests inject a :class:`Throughput` and never time anything.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from sirerag.core.config import BuildConfig
from sirerag.core.io.files import user_cache_dir, write_json
from sirerag.text.tokens import count_tokens_many

if TYPE_CHECKING:
    from sirerag.embedding.base import Embedder
    from sirerag.llm.base import LLM
    from sirerag.pipeline.dryrun_estimates import StageEstimate

logger = logging.getLogger(__name__)

#: texts (of about CALIBRATION_WORDS words: a default chunk of 100 tokens) the embedder calibration times
CALIBRATION_TEXTS, CALIBRATION_WORDS = 64, 75
#: output tokens of the second LLM probe, and the seconds either may take (no retry)
PROBE_OUTPUT_TOKENS, PROBE_TIMEOUT = 64, 60.0
_WORDS = ("river bridge city museum library station harbour valley mountain forest school church castle garden "
          "market festival railway island province council village theatre tower canal factory stadium").split()


@dataclass(frozen=True)
class Throughput:
    """What the machine (and the LLM endpoint) does per second. ``None``: not measured (that part of the time is
    not estimated). ``notes``: where each figure comes from."""

    embed_tokens_per_s: float | None = None
    llm_input_tokens_per_s: float | None = None
    llm_output_tokens_per_s: float | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class StageTime:
    """The estimated wall seconds of one stage of the plan (None: not estimated) and how they were reckoned."""

    stage: str
    seconds: float | None
    basis: str


def machine() -> dict[str, Any]:
    """What the embedder's speed depends on besides the model: host, CPU model, usable cores."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "")
    except OSError:
        model = platform.processor()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return {"host": platform.node(), "arch": platform.machine(), "cpu": model, "cores": cores}


def calibration_texts(n: int = CALIBRATION_TEXTS, words: int = CALIBRATION_WORDS) -> list[str]:
    """``n`` distinct texts of ``words`` words (deterministic)."""
    return [" ".join(_WORDS[(i * 7 + j * (i % 5 + 1)) % len(_WORDS)] for j in range(words)) + f" {i}."
            for i in range(n)]


def calibrate_embedder(embedder: Embedder, *, clock: Callable[[], float] = time.perf_counter) -> float:
    """Tokens (cl100k, as the dry run counts chunks) per second of ``embedder.encode_documents`` on
    :func:`calibration_texts`, after a warm-up batch."""
    texts = calibration_texts()
    embedder.encode_documents(calibration_texts(8, 20))  # loads lazily-built parts
    start = clock()
    embedder.encode_documents(texts)
    seconds = max(clock() - start, 1e-9)
    return sum(count_tokens_many(texts)) / seconds


def embedder_throughput(config: BuildConfig, *, folder: Path | None = None,
                        load: Callable[[], Embedder] | None = None,
                        clock: Callable[[], float] = time.perf_counter) -> tuple[float | None, str]:
    """``(tokens per second, note)`` of the build's embedder on this machine: from the per-machine cache in
    ``folder`` (default the user cache folder), else calibrated now (``load()`` gives the embedder) and cached."""
    spec = config.embedder.spec
    if spec.startswith("openai"):
        return None, f"embedder {spec}: an API, not calibrated (embedding time not estimated)"
    key = {"model": spec, "precision": config.embedder.precision, "batch_size": config.embedder.batch_size,
           "machine": machine()}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    path = (folder or user_cache_dir("throughput")) / f"{digest}.json"
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("key") == key and float(cached["embed_tokens_per_s"]) > 0:
            return float(cached["embed_tokens_per_s"]), \
                f"embedder {spec}: {cached['embed_tokens_per_s']:,.0f} tokens/s, calibrated {cached['at']} ({path})"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if load is None:
        from sirerag.embedding import load_embedder

        def load() -> Embedder:
            return load_embedder(spec, batch_size=config.embedder.batch_size, precision=config.embedder.precision,
                                 show_progress=False)
    rate = calibrate_embedder(load(), clock=clock)
    at = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:
        write_json(path, {"key": key, "embed_tokens_per_s": rate, "at": at})
    except OSError as exc:  # a read-only home: the figure is still used, only not kept
        logger.info("could not cache the embedder calibration in %s: %s", path, exc)
    return rate, f"embedder {spec}: {rate:,.0f} tokens/s, calibrated now ({path})"


def llm_throughput(llm: LLM, *, clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """``(prompt tokens/s, output tokens/s)`` of ``llm`` from two short requests of the same prompt length after a
    one-token warm-up (no call cache): the first answers one token, the second :data:`PROBE_OUTPUT_TOKENS` more, and
    the extra tokens over the extra time give the output rate."""
    from sirerag.llm.base import LLMRequest

    texts = calibration_texts(4)
    llm.complete(LLMRequest(messages=(("user", "Say OK."),), max_tokens=1, temperature=0.0))  # a warm server
    timed = []
    for order, max_tokens in ((1, 1), (-1, 1 + PROBE_OUTPUT_TOKENS)):  # the same words in another order: the
        prompt = "Summarise in one paragraph: " + " ".join(texts[::order])  # same length, no reused prompt cache
        request = LLMRequest(messages=(("user", prompt),), max_tokens=max_tokens, temperature=0.0)
        start = clock()
        completion = llm.complete(request)
        timed.append((max(clock() - start, 1e-9), completion))
    (first, one), (second, more) = timed
    prefill = max(one.prompt_tokens, 1) / first
    extra = more.completion_tokens - one.completion_tokens
    decode = extra / (second - first) if extra > 0 and second > first else more.completion_tokens / second
    return prefill, max(decode, 1e-9)


def estimate_times(plan: Sequence[str], stages: Sequence[StageEstimate], corpus: dict[str, int],
                   throughput: Throughput) -> list[StageTime]:
    """The wall time of each stage of ``plan`` from the dry run's LLM rows (``stages``: StageEstimate, with
    ``plan_stage``), the corpus counts and ``throughput``."""
    embed = throughput.embed_tokens_per_s
    prefill, decode = throughput.llm_input_tokens_per_s, throughput.llm_output_tokens_per_s
    out = []
    for name in plan:
        rows = [s for s in stages if s.plan_stage == name]
        seconds: float | None = 0.0
        basis: list[str] = []
        if rows:
            uncached = [(s, 1.0 - s.cached / s.calls if s.calls else 0.0) for s in rows]
            if prefill and decode:
                seconds = sum(f * (s.input_tokens / prefill + s.output_tokens_est / decode) for s, f in uncached)
                basis.append(f"{sum(s.calls - s.cached for s in rows):,} LLM calls at the measured tokens/s")
            else:
                seconds = None
                basis.append(f"{sum(s.calls for s in rows):,} LLM calls: LLM speed not measured")
        embedded = {"embed_leaves": corpus.get("chunk_tokens", 0),
                    "similarity_tree": sum(s.output_tokens_est for s in rows),
                    "relatedness_tree": corpus.get("chunk_tokens", 0)}.get(name)
        if embedded:
            if embed:
                seconds = None if seconds is None else seconds + embedded / embed
                basis.append(f"{embedded:,} tokens to embed")
            else:
                seconds = None
                basis.append("embedder speed not measured")
        if name in ("similarity_tree", "relatedness_tree"):
            basis.append("clustering not counted")
        if name == "relatedness_tree":
            basis.append("propositions taken as long as the chunks")
        if name == "graph":
            seconds, basis = None, ["entity names and facts to embed: not estimated"]
        out.append(StageTime(name, seconds, "; ".join(basis) or "no model work"))
    return out


def measure(config: BuildConfig, *, folder: Path | None = None) -> Throughput:
    """The build's throughput on this machine: the embedder's (cached per machine) and, for an ``openai:`` LLM
    endpoint, its tokens per second measured now."""
    from sirerag.llm.probe import OPENAI_API
    from sirerag.pipeline.endpoints import llm_endpoint

    embed, note = embedder_throughput(config, folder=folder)
    notes = [note]
    prefill = decode = None
    spec = config.extraction.llm or config.llm.spec
    endpoint = llm_endpoint("--llm", spec, config.llm)
    if endpoint is not None and OPENAI_API in endpoint.urls:
        notes.append(f"LLM {spec}: OpenAI's API is not measured (the requests would be paid; LLM time not "
                     "estimated)")
    elif endpoint is not None and spec is not None:
        from sirerag.core.errors import SireragError
        from sirerag.llm.factory import load_llm

        quick = replace(config.llm, max_retries=0, timeout=min(config.llm.timeout, PROBE_TIMEOUT))
        try:
            prefill, decode = llm_throughput(load_llm(spec, config=quick, cache_dir=None))
            notes.append(f"LLM {spec}: {prefill:,.0f} prompt tokens/s, {decode:,.1f} output tokens/s, measured now "
                         "with 3 short requests")
        except (SireragError, OSError) as exc:  # the estimate is a courtesy: the dry run goes on without it
            notes.append(f"LLM {spec}: did not answer the timing request ({exc}); LLM time not estimated")
    elif spec:
        notes.append(f"LLM {spec}: a local model is not loaded by the dry run (LLM time not estimated)")
    return Throughput(embed, prefill, decode, tuple(notes))


def times_to_dict(times: Sequence[StageTime], throughput: Throughput) -> dict[str, Any]:
    total = sum(t.seconds for t in times if t.seconds is not None)
    return {"throughput": asdict(throughput), "stages": [asdict(t) for t in times], "total_s": total,
            "complete": all(t.seconds is not None for t in times)}
