"""Evaluating an extractor against held-out teacher data (``finetune evaluate``).

The extractor under test (any LLM spec: the base model, ``hf:BASE+adapter=DIR``,
a server) answers the validation prompts exactly as a build would send them, and
its answers are read with the build's own parser and cleaning:

* ``extract`` examples: JSON validity rate (the answer parses into at least one fact;
  failures counted by reason), entity precision/recall/F1 over entity keys
  (:func:`sirerag.extraction.entity_key`, micro-averaged), and proposition
  precision/recall/F1 from a one-to-one matching (Hungarian algorithm on token-F1
  or ROUGE-L, pairs below ``threshold`` unmatched);
* ``rewrite`` examples: the drift guard's acceptance rate and ROUGE-L / token-F1
  against the teacher's rewrite;
* downstream (with a corpus): the build's extraction stage run with the extractor,
  and the proposition-aggregate and pool statistics that result (paper Table 3).
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from sirerag.core.config import ChunkingConfig, ExtractionConfig, LLMConfig
from sirerag.core.errors import check
from sirerag.core.io import atomic_path, write_json
from sirerag.llm.base import LLMCallError, LLMRequest
from sirerag.core.types import Document

from sirerag_finetune.data_format import Example, read_examples
from sirerag_finetune.metrics import PRF, match_propositions, rouge_l, set_prf, token_f1

logger = logging.getLogger(__name__)


def _request(example: Example, max_tokens: int | None) -> LLMRequest:
    budget = example.max_tokens if max_tokens is None else min(example.max_tokens, max_tokens)
    return LLMRequest(messages=example.messages[:-1], max_tokens=budget, prompt_version=example.prompt)


def score_extraction(answers: Sequence[str], examples: Sequence[Example], *, similarity: str = "token_f1",
                     threshold: float = 0.5) -> dict[str, Any]:
    """Metrics of extraction answers against the teacher's facts (see the module docstring)."""
    from sirerag.extraction import ParseError, clean_facts, entity_key, parse_facts

    entities, props = PRF(), PRF()
    matched_similarity: list[float] = []
    invalid: Counter[str] = Counter()
    n_pred = n_ref = 0
    for answer, example in zip(answers, examples):
        reference = parse_facts(example.messages[-1][1]).facts
        try:
            parsed = parse_facts(answer)
            predicted, _, _ = clean_facts(parsed.facts, example.inputs.get("source", example.inputs["paragraph"]))
            if parsed.facts and not predicted:
                raise ParseError("the answer repeats the prompt's example or facts not in the paragraph")
        except ParseError as exc:
            invalid[exc.reason] += 1
            predicted = []
        n_pred, n_ref = n_pred + len(predicted), n_ref + len(reference)
        entities += set_prf({entity_key(e) for f in predicted for e in f.entities},
                            {entity_key(e) for f in reference for e in f.entities})
        matching = match_propositions([f.text for f in predicted], [f.text for f in reference],
                                      similarity=similarity, threshold=threshold)
        props += matching.counts
        matched_similarity += [s for _, _, s in matching.pairs]
    n = len(examples)
    return {
        "examples": n,
        "json_valid_rate": round((n - sum(invalid.values())) / n, 4) if n else None,
        "invalid_reasons": dict(invalid.most_common()),
        "entities": entities.as_dict(),
        "propositions": {**props.as_dict(), "similarity": similarity, "threshold": threshold,
                         "mean_matched_similarity": round(sum(matched_similarity) / len(matched_similarity), 4)
                         if matched_similarity else 0.0},
        "facts_per_example": {"predicted": round(n_pred / n, 2) if n else 0.0,
                              "reference": round(n_ref / n, 2) if n else 0.0},
    }


def score_rewrites(answers: Sequence[str], examples: Sequence[Example]) -> dict[str, Any]:
    """Drift-guard acceptance and similarity of rewrites to the teacher's."""
    from sirerag.extraction import drift_reason
    from sirerag.extraction.coref import clean_rewrite

    accepted = 0
    rl, tf = [], []
    for answer, example in zip(answers, examples):
        text = clean_rewrite(answer)
        accepted += drift_reason(example.inputs["paragraph"], text, example.inputs["previous"]) is None
        rl.append(rouge_l(text, example.messages[-1][1]))
        tf.append(token_f1(text, example.messages[-1][1]))
    n = len(examples)
    return {"examples": n, "accepted_rate": round(accepted / n, 4) if n else None,
            "rouge_l": round(sum(rl) / n, 4) if n else None, "token_f1": round(sum(tf) / n, 4) if n else None}


def downstream_stats(documents: Sequence[Document], llm: Any, *, chunking: ChunkingConfig | None = None,
                     extraction: ExtractionConfig | None = None, show_progress: bool = True) -> dict[str, Any]:
    """Run the build's extraction stage with ``llm`` and report extraction, aggregate and pool counts
    (the pool before summaries: one leaf per chunk plus the aggregates)."""
    from sirerag.text.chunking import chunk_documents
    from sirerag.extraction import extract
    from sirerag.trees.aggregates import build_aggregates

    chunks = chunk_documents(documents, chunking or ChunkingConfig(mode="passage"))
    config = extraction or ExtractionConfig(extractor="llm")
    result = extract(chunks, documents, config=config, llm=llm, show_progress=show_progress)
    aggregates = build_aggregates(result.propositions)
    return {"extraction": result.stats, "aggregates": aggregates.stats,
            "pool": {"leaves": len(chunks), "aggregates": len(aggregates.nodes),
                     "entries_before_summaries": len(chunks) + len(aggregates.nodes)}}


def evaluate_extractor(
    extractor: str,
    data: str | Path,
    *,
    llm_config: LLMConfig | None = None,
    cache_dir: str | Path | None = None,
    max_examples: int | None = None,
    max_tokens: int | None = None,
    similarity: str = "token_f1",
    threshold: float = 0.5,
    corpus: str | Path | Sequence[Document] | None = None,
    extraction: ExtractionConfig | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Evaluate one extractor on a split written by ``finetune make-data``.

    Args:
        extractor: LLM spec, e.g. ``hf:smollm2`` or ``hf:smollm2+adapter=runs/x/adapter``.
        data: ``validation.jsonl`` (its ``validation.meta.jsonl`` must sit beside it).
        llm_config: backend settings; cache_dir: call cache folder (None: no cache).
        max_examples: evaluate only the first N examples.
        max_tokens: cap every request's completion budget (default: the build's budget).
        similarity, threshold: proposition matching (``token_f1`` or ``rouge_l``).
        corpus: optional small corpus for the downstream statistics.
        extraction: extraction settings for the downstream run (``extractor="llm"`` is forced).
        show_progress: progress bars.

    Returns:
        A JSON-ready report with ``extract``, ``rewrite`` and (with a corpus) ``downstream``.
    """
    from dataclasses import replace

    from sirerag.corpus.load import load_corpus
    from sirerag.llm.factory import load_llm

    check(max_examples is None or max_examples >= 1, "max_examples", max_examples, "a positive integer or None")
    check(max_tokens is None or max_tokens >= 16, "max_tokens", max_tokens, "an integer >= 16 or None")
    started = time.perf_counter()
    examples = read_examples(data)[:max_examples]
    llm = load_llm(extractor, config=llm_config or LLMConfig(), cache_dir=cache_dir)
    results = llm.complete_many([_request(e, max_tokens) for e in examples], return_exceptions=True)
    answers = ["" if isinstance(r, LLMCallError) else r.text for r in results]
    failed_calls = sum(isinstance(r, LLMCallError) for r in results)
    report: dict[str, Any] = {"extractor": llm.spec, "data": str(data), "failed_calls": failed_calls}
    for task, scorer in (("extract", score_extraction), ("rewrite", score_rewrites)):
        pairs = [(a, e) for a, e in zip(answers, examples) if e.task == task]
        if pairs:
            kwargs = {"similarity": similarity, "threshold": threshold} if task == "extract" else {}
            report[task] = scorer([a for a, _ in pairs], [e for _, e in pairs], **kwargs)
    if corpus is not None:
        documents = list(corpus) if not isinstance(corpus, (str, Path)) else load_corpus(corpus)
        config = replace(extraction or ExtractionConfig(), extractor="llm")
        report["downstream"] = downstream_stats(documents, llm, extraction=config, show_progress=show_progress)
    report["seconds"] = round(time.perf_counter() - started, 2)
    return report


def write_report(reports: Sequence[dict[str, Any]], out: str | Path) -> None:
    """Write ``eval.json`` (all reports) and ``eval.md`` (a side-by-side table) into ``out``."""
    out = Path(out)
    write_json(out / "eval.json", list(reports))
    with atomic_path(out / "eval.md") as tmp:
        tmp.write_text(report_markdown(reports), encoding="utf-8")


def report_markdown(reports: Sequence[dict[str, Any]]) -> str:
    """One column per extractor: validity, entity and proposition F1, rewrite scores, downstream counts."""
    def get(report: dict[str, Any], *path: str) -> Any:
        value: Any = report
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return "–" if value is None else value

    rows = [("extract examples", ("extract", "examples")), ("JSON valid rate", ("extract", "json_valid_rate")),
            ("entity P", ("extract", "entities", "precision")), ("entity R", ("extract", "entities", "recall")),
            ("entity F1", ("extract", "entities", "f1")),
            ("proposition P", ("extract", "propositions", "precision")),
            ("proposition R", ("extract", "propositions", "recall")),
            ("proposition F1", ("extract", "propositions", "f1")),
            ("facts per answer", ("extract", "facts_per_example", "predicted")),
            ("rewrite examples", ("rewrite", "examples")), ("rewrite accepted", ("rewrite", "accepted_rate")),
            ("rewrite ROUGE-L", ("rewrite", "rouge_l")),
            ("downstream propositions", ("downstream", "extraction", "propositions")),
            ("downstream failed chunks", ("downstream", "extraction", "failed_chunks")),
            ("downstream entities", ("downstream", "aggregates", "entities")),
            ("downstream aggregates", ("downstream", "aggregates", "aggregates")),
            ("downstream pool (no summaries)", ("downstream", "pool", "entries_before_summaries")),
            ("seconds", ("seconds",))]
    header = "| metric | " + " | ".join(f"`{r['extractor']}`" for r in reports) + " |"
    lines = ["# Extractor evaluation", "", header, "|---" * (len(reports) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(str(get(r, *path)) for r in reports) + " |" for name, path in rows]
    return "\n".join(lines) + "\n"
