"""Distilling SiReRAG's proposition extractor into a small model with LoRA.

SiReRAG (Zhang et al., section 4.2) rewrote chunks and extracted propositions
and entities with Llama-3-70B-Instruct, then fine-tuned Mistral-7B-Instruct-v0.3
on those outputs and used the small model for extraction. This package does
the same with any teacher and any base model:

* :func:`make_teacher_data` — teacher outputs that parse and validate, as chat JSONL
  split by document, with a data card (``finetune make-data``);
* :func:`train_lora` — LoRA training on assistant tokens only (``finetune train``);
* :func:`evaluate_extractor` — validity, entity and proposition P/R/F1 and downstream
  aggregate statistics against held-out teacher data (``finetune evaluate``).

The folder ``finetune/`` installs as the package ``sirerag_finetune`` (the name
``finetune`` is someone else's on PyPI). Its commands join the ``sirerag`` CLI
through the ``sirerag.commands`` entry point; core sirerag never imports it.
The trained adapter serves builds as ``--extractor-llm hf:BASE+adapter=DIR``.
Heavy dependencies (torch, transformers, peft, matplotlib) are imported only
when a function that needs them runs.
"""
from __future__ import annotations

from typing import Any

__all__ = ["TrainConfig", "evaluate_extractor", "load_train_config", "make_teacher_data", "train_lora"]


def __getattr__(name: str) -> Any:
    if name in ("TrainConfig", "load_train_config"):
        from sirerag_finetune import config

        return getattr(config, name)
    if name == "make_teacher_data":
        from sirerag_finetune.make_data import make_teacher_data

        return make_teacher_data
    if name == "train_lora":
        from sirerag_finetune.train import train_lora

        return train_lora
    if name == "evaluate_extractor":
        from sirerag_finetune.evaluate import evaluate_extractor

        return evaluate_extractor
    raise AttributeError(f"module 'sirerag_finetune' has no attribute {name!r}")
