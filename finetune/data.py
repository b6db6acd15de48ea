"""Teacher data for distilling the extractor (``finetune make-data``).

A teacher LLM (any backend: an OpenAI-compatible server, a local ``hf:`` model)
runs the build's two extraction prompts over a corpus, through the build's own
code (:func:`sirerag.extraction.rewrite_chunks`, :func:`sirerag.extraction.extract_facts`),
so the student learns exactly the requests it will be sent:

* ``rewrite``: the coreference rewrite (paper Figure 6); kept only when the drift
  guard accepts it (the target is the cleaned rewrite);
* ``extract``: proposition + entity extraction (paper Figure 7) on the accepted
  rewrite (or the original text when the rewrite was refused); kept only when the
  answer parses and validates, with at least one fact left after the build's
  cleaning. The target is the validated facts re-serialised canonically (a code
  block with ``{"f1": {"fact": ..., "entities": [...]}, ...}``), and the prompt is
  always the first-attempt prompt even if the teacher needed a retry.

Everything rejected is written to ``rejected.jsonl`` with the stage, the reason
and the raw output. Examples are split into train/validation *by document*
(seeded), so no document contributes to both. Every teacher call goes through the
call cache, so running again is free.

Output folder: ``train.jsonl`` / ``validation.jsonl`` (chat rows ``{"messages":
[...]}`` only, readable by any chat fine-tuning tool), ``train.meta.jsonl`` /
``validation.meta.jsonl`` (one line per row: task, document, chunk, prompt
version, request budget, inputs), ``rejected.jsonl``, ``data_card.json`` and
``data_card.md``.
"""
from __future__ import annotations

import json
import logging
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sirerag.config import ChunkingConfig, LLMConfig
from sirerag.errors import ConfigError, InputError, check
from sirerag.io import atomic_path, read_jsonl, write_json, write_jsonl
from sirerag.llm.prompts import COREF_REWRITE, EXTRACT_PROPOSITIONS
from sirerag.types import Document

logger = logging.getLogger(__name__)

TASKS = ("rewrite", "extract")
TRAIN, VALIDATION = "train", "validation"


@dataclass(frozen=True)
class Example:
    """One training conversation and where it came from.

    ``messages`` are ``(role, content)`` pairs ending with the assistant target;
    ``inputs`` are the prompt fields (``previous``/``paragraph`` for a rewrite,
    ``paragraph``/``source`` for an extraction; ``source`` is what entities are
    grounded against); ``max_tokens`` is the completion budget the build uses.
    """

    messages: tuple[tuple[str, str], ...]
    task: str
    doc_id: str
    chunk_id: str
    prompt: str
    max_tokens: int
    inputs: dict[str, str] = field(default_factory=dict)

    def chat_row(self) -> dict[str, Any]:
        return {"messages": [{"role": r, "content": c} for r, c in self.messages]}

    def meta_row(self) -> dict[str, Any]:
        row = asdict(self)
        del row["messages"]
        return row


def facts_target(facts: Sequence[Any]) -> str:
    """The canonical answer for validated facts: a JSON code block, one fact per line,
    keys ``f1``, ``f2``, ... (the shape the extraction prompt asks for)."""
    lines = [f'  "f{i}": ' + json.dumps({"fact": f.text, "entities": list(f.entities)}, ensure_ascii=False)
             for i, f in enumerate(facts, start=1)]
    return "```json\n{\n" + ",\n".join(lines) + "\n}\n```"


def extraction_example(paragraph: str, facts: Sequence[Any], *, doc_id: str, chunk_id: str,
                       max_tokens: int, source: str | None = None) -> Example:
    """An ``extract`` example: the first-attempt Figure 7 prompt and the canonical facts."""
    messages = EXTRACT_PROPOSITIONS.messages(paragraph=paragraph) + (("assistant", facts_target(facts)),)
    return Example(messages, "extract", doc_id, chunk_id, EXTRACT_PROPOSITIONS.key, max_tokens,
                   {"paragraph": paragraph, "source": source if source is not None else paragraph})


def rewrite_example(previous: str, paragraph: str, rewrite: str, *, doc_id: str, chunk_id: str,
                    max_tokens: int) -> Example:
    """A ``rewrite`` example: the Figure 6 prompt and the accepted rewrite."""
    messages = COREF_REWRITE.messages(previous=previous, paragraph=paragraph) + (("assistant", rewrite),)
    return Example(messages, "rewrite", doc_id, chunk_id, COREF_REWRITE.key, max_tokens,
                   {"previous": previous, "paragraph": paragraph})


def teacher_examples(
    documents: Sequence[Document],
    llm: Any,
    *,
    chunking: ChunkingConfig,
    tasks: Sequence[str] = TASKS,
    rewrite_max_tokens: int = 512,
    extract_max_tokens: int = 1024,
    max_attempts: int = 2,
    show_progress: bool = True,
) -> tuple[list[Example], list[dict[str, Any]], dict[str, int]]:
    """Run the teacher over ``documents``; returns ``(examples, rejected, counts)``.

    ``rejected`` holds one record per refused output (``stage``, ``reason``, ``raw``).
    """
    from sirerag.chunking import chunk_documents
    from sirerag.extraction import extract_facts, rewrite_chunks
    from sirerag.extraction.coref import context_for

    chunks = chunk_documents(documents, chunking)
    by_id = {d.id: d for d in documents}
    contexts, previous = [], {}
    for chunk in chunks:
        contexts.append(context_for(chunk, previous.get(chunk.doc_id), by_id.get(chunk.doc_id)))
        previous[chunk.doc_id] = chunk
    examples: list[Example] = []
    rejected: list[dict[str, Any]] = []
    counts: Counter[str] = Counter(chunks=len(chunks))
    texts = [c.text for c in chunks]
    if "rewrite" in tasks:
        outcomes = rewrite_chunks(chunks, documents, llm, max_tokens=rewrite_max_tokens, show_progress=show_progress)
        for i, (chunk, context, r) in enumerate(zip(chunks, contexts, outcomes)):
            budget = max(32, min(rewrite_max_tokens, 2 * chunk.n_tokens + 64))  # as rewrite_chunks asks
            if r.accepted:
                texts[i] = r.text
                examples.append(rewrite_example(context, chunk.text, r.text, doc_id=chunk.doc_id,
                                                chunk_id=chunk.id, max_tokens=budget))
            else:
                rejected.append({"stage": "rewrite", "doc_id": chunk.doc_id, "chunk_id": chunk.id,
                                 "reason": r.reason, "raw": r.raw})
    if "extract" in tasks:
        sources = ["\n".join((c.text, t, ctx)) for c, t, ctx in zip(chunks, texts, contexts)]
        outcomes = extract_facts(texts, llm, sources=sources, max_tokens=extract_max_tokens,
                                 max_attempts=max_attempts, show_progress=show_progress)
        for chunk, text, source, o in zip(chunks, texts, sources, outcomes):
            counts["extract_retried"] += o.attempts > 1
            counts["facts_dropped_by_cleaning"] += o.echoed
            counts["entities_dropped_ungrounded"] += o.ungrounded
            reason = o.error or (None if o.facts else "the answer holds no facts")
            if reason is not None:
                rejected.append({"stage": "extract", "doc_id": chunk.doc_id, "chunk_id": chunk.id,
                                 "reason": reason, "raw": list(o.raw)})
                continue
            examples.append(extraction_example(text, o.facts, doc_id=chunk.doc_id, chunk_id=chunk.id,
                                               max_tokens=extract_max_tokens, source=source))
    return examples, rejected, dict(counts)


def split_by_document(examples: Sequence[Example], validation_fraction: float,
                      seed: int) -> tuple[list[Example], list[Example]]:
    """Seeded split of whole documents: ``round(fraction * n_docs)`` documents (at least one
    when the fraction is positive and there are two or more) go to validation."""
    docs = sorted({e.doc_id for e in examples})
    random.Random(seed).shuffle(docs)
    n_val = round(validation_fraction * len(docs))
    if validation_fraction > 0 and len(docs) >= 2:
        n_val = min(max(n_val, 1), len(docs) - 1)
    held_out = set(docs[:n_val])
    return ([e for e in examples if e.doc_id not in held_out], [e for e in examples if e.doc_id in held_out])


def _reason_kind(reason: str | None) -> str:
    """Group reasons that differ only in numbers ("keeps only 41% ..." -> "keeps only #% ...")."""
    return re.sub(r"\d+(?:\.\d+)?", "#", reason or "unknown")


def make_teacher_data(
    corpus: str | Path | Sequence[Document],
    out: str | Path,
    *,
    teacher: str,
    llm_config: LLMConfig | None = None,
    cache_dir: str | Path | None = None,
    chunking: ChunkingConfig | None = None,
    tasks: Sequence[str] = TASKS,
    validation_fraction: float = 0.2,
    seed: int = 224,
    limit: int | None = None,
    rewrite_max_tokens: int = 512,
    extract_max_tokens: int = 1024,
    max_attempts: int = 2,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Make teacher data and write it to ``out``; returns the data card.

    Args:
        corpus: a corpus path (as ``sirerag build`` reads) or loaded documents.
        out: output folder (created).
        teacher: LLM spec of the teacher, e.g. ``openai:Meta-Llama-3-70B-Instruct@http://...``.
        llm_config: backend settings (concurrency, batch size, device...).
        cache_dir: call cache folder (default ``<out>/cache``).
        chunking: how documents are chunked (default: one chunk per document).
        tasks: ``rewrite`` and/or ``extract``.
        validation_fraction: share of documents held out for validation, in [0, 1).
        seed: seed of the document split.
        limit: use only the first ``limit`` documents.
        rewrite_max_tokens, extract_max_tokens, max_attempts: as in the build's extraction stage.
        show_progress: progress bars.

    Raises:
        ConfigError: invalid arguments, or no valid example at all.
        InputError: the corpus cannot be read.
    """
    from sirerag.io.corpus import load_corpus
    from sirerag.llm.factory import load_llm

    tasks = tuple(tasks)
    check(bool(tasks) and all(t in TASKS for t in tasks), "tasks", tasks, f"a non-empty subset of {TASKS}")
    check(0.0 <= validation_fraction < 1.0, "validation_fraction", validation_fraction, "a number in [0, 1)")
    check(limit is None or (isinstance(limit, int) and limit > 0), "limit", limit, "a positive integer or None")
    chunking = chunking or ChunkingConfig(mode="passage")
    out = Path(out)
    documents = list(corpus) if not isinstance(corpus, (str, Path)) else load_corpus(corpus)
    documents = documents[:limit] if limit else documents
    llm = load_llm(teacher, config=llm_config or LLMConfig(), cache_dir=cache_dir or out / "cache")
    examples, rejected, counts = teacher_examples(
        documents, llm, chunking=chunking, tasks=tasks, rewrite_max_tokens=rewrite_max_tokens,
        extract_max_tokens=extract_max_tokens, max_attempts=max_attempts, show_progress=show_progress)
    write_jsonl(out / "rejected.jsonl", rejected)
    if not examples:
        raise ConfigError(f"teacher {llm.spec!r} produced no valid example from {len(documents)} document(s) "
                          f"({len(rejected)} outputs rejected; see {out / 'rejected.jsonl'}); use a stronger teacher")
    train, validation = split_by_document(examples, validation_fraction, seed)
    card = write_dataset(out, train, validation, extra={
        "teacher": llm.spec, "corpus": str(corpus) if isinstance(corpus, (str, Path)) else "<in memory>",
        "documents": len(documents), "chunking": asdict(chunking), "tasks": list(tasks),
        "prompt_versions": {"rewrite": COREF_REWRITE.key, "extract": EXTRACT_PROPOSITIONS.key},
        "budgets": {"rewrite_max_tokens": rewrite_max_tokens, "extract_max_tokens": extract_max_tokens,
                    "max_attempts": max_attempts},
        "split": {"by": "document", "seed": seed, "validation_fraction": validation_fraction},
        "teacher_counts": counts,
        "rejected": {"total": len(rejected),
                     "by_stage": dict(Counter(r["stage"] for r in rejected)),
                     "by_reason": dict(Counter(f"{r['stage']}: {_reason_kind(r['reason'])}" for r in rejected)
                                       .most_common())},
    })
    logger.info("teacher data: %d train / %d validation examples, %d rejected outputs -> %s",
                len(train), len(validation), len(rejected), out)
    return card


def write_dataset(out: str | Path, train: Sequence[Example], validation: Sequence[Example],
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the chat files, their meta files and the data card; returns the card."""
    out = Path(out)
    card: dict[str, Any] = {"format": "chat-jsonl", **(extra or {})}
    card["examples"] = {}
    for split, rows in ((TRAIN, train), (VALIDATION, validation)):
        write_jsonl(out / f"{split}.jsonl", (e.chat_row() for e in rows))
        write_jsonl(out / f"{split}.meta.jsonl", (e.meta_row() for e in rows))
        card["examples"][split] = {"total": len(rows), "by_task": dict(Counter(e.task for e in rows)),
                                   "documents": len({e.doc_id for e in rows})}
    leaked = {e.doc_id for e in train} & {e.doc_id for e in validation}
    if leaked:
        raise ConfigError(f"documents in both splits: {sorted(leaked)[:5]}")
    write_json(out / "data_card.json", card)
    with atomic_path(out / "data_card.md") as tmp:
        tmp.write_text(card_markdown(card), encoding="utf-8")
    return card


def card_markdown(card: dict[str, Any]) -> str:
    """A human-readable data card."""
    ex = card["examples"]
    lines = ["# Teacher data card", "",
             f"- teacher: `{card.get('teacher', '?')}`",
             f"- corpus: `{card.get('corpus', '?')}` ({card.get('documents', '?')} documents)",
             f"- prompts: {', '.join(f'`{v}`' for v in card.get('prompt_versions', {}).values())}",
             f"- split: by {card.get('split', {}).get('by', '?')}, seed {card.get('split', {}).get('seed', '?')}, "
             f"validation fraction {card.get('split', {}).get('validation_fraction', '?')}", "",
             "| split | examples | rewrite | extract | documents |", "|---|---|---|---|---|"]
    for split in (TRAIN, VALIDATION):
        s = ex.get(split, {})
        lines.append(f"| {split} | {s.get('total', 0)} | {s.get('by_task', {}).get('rewrite', 0)} | "
                     f"{s.get('by_task', {}).get('extract', 0)} | {s.get('documents', 0)} |")
    rejected = card.get("rejected", {})
    lines += ["", f"## Rejected teacher outputs: {rejected.get('total', 0)}", ""]
    lines += [f"- {n} × {reason}" for reason, n in rejected.get("by_reason", {}).items()]
    if card.get("supplement"):
        lines += ["", "## Supplement", "", str(card["supplement"])]
    return "\n".join(lines) + "\n"


def read_examples(path: str | Path) -> list[Example]:
    """Read a split written by :func:`write_dataset` (``X.jsonl`` with ``X.meta.jsonl`` beside it).

    Raises:
        InputError: the meta file is missing or does not line up with the chat file.
    """
    path = Path(path)
    meta_path = path.with_name(path.name.removesuffix(".jsonl") + ".meta.jsonl")
    if not meta_path.is_file():
        raise InputError(f"{meta_path} is missing: evaluation needs the meta file written by "
                         "'finetune make-data' beside the chat file")
    rows, metas = list(read_jsonl(path)), list(read_jsonl(meta_path))
    if len(rows) != len(metas):
        raise InputError(f"{path} has {len(rows)} rows but {meta_path} has {len(metas)}")
    out = []
    for n, (row, meta) in enumerate(zip(rows, metas), start=1):
        try:
            messages = tuple((m["role"], m["content"]) for m in row["messages"])
            out.append(Example(messages=messages, **meta))
        except (KeyError, TypeError) as exc:
            raise InputError(f"{path}: row {n}: does not match its meta row ({exc})") from exc
    return out
