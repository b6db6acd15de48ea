"""``sirerag finetune make-data | train | evaluate``: distil the extractor into a LoRA adapter.

Thin: the commands live in the ``finetune`` package (installed with sirerag),
imported only when this subcommand is registered.
"""
from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("finetune", help="teacher data, LoRA training and evaluation of the extractor",
                       description="Distil the proposition/entity extractor into a small model with LoRA "
                                   "(see docs/finetune.md).")
    from finetune.cli import add_subcommands

    add_subcommands(p)
