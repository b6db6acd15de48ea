"""The teacher-data file format: examples, the document split, the data card.

A split is a chat file ``X.jsonl`` (rows ``{"messages": [...]}`` only, readable by
any chat fine-tuning tool) with ``X.meta.jsonl`` beside it, one line per row
(task, document, chunk, prompt version, completion budget, prompt inputs).
"""
from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sirerag.core.errors import ConfigError, InputError
from sirerag.core.io import atomic_path, read_jsonl, write_json, write_jsonl
from sirerag.llm.prompts import COREF_REWRITE, EXTRACT_PROPOSITIONS

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
