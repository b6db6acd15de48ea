"""Command line of the fine-tuning tools: ``sirerag finetune make-data | train | evaluate``.

Argument parsing only; the work is imported inside each command so ``--help``
stays fast. :func:`register` is the ``sirerag.commands`` entry point through which
``sirerag`` finds these commands; ``python -m sirerag_finetune ...`` runs the same
commands through :func:`main`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from sirerag.cli.common import add_common, progress_enabled


def register(sub: Any) -> None:
    """Add the ``finetune`` command to the ``sirerag`` subparsers (the entry point)."""
    p = sub.add_parser("finetune", help="teacher data, LoRA training and evaluation of the extractor",
                       description="Distil the proposition/entity extractor into a small model with LoRA "
                                   "(see docs/finetune.md).")
    add_subcommands(p)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sirerag_finetune STEP ...``: the ``sirerag finetune`` commands, whether or
    not the entry point is installed."""
    from sirerag.cli.main import main as sirerag_main

    args = list(sys.argv[1:] if argv is None else argv)
    return sirerag_main(["finetune", *args], commands={"finetune": register})


def add_subcommands(parser: argparse.ArgumentParser) -> None:
    """Add ``make-data``, ``train`` and ``evaluate`` under the ``finetune`` parser."""
    sub = parser.add_subparsers(dest="finetune_command", metavar="STEP")

    def usage(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=usage)

    p = sub.add_parser("make-data", help="run a teacher LLM over a corpus and write chat JSONL + a data card",
                       description="Teacher data: coreference rewrites and proposition/entity extractions that "
                                   "parse and validate, as chat JSONL split by document.")
    p.add_argument("corpus", help="corpus path (.jsonl/.json/folder, as for 'sirerag build')")
    p.add_argument("--teacher", required=True, help="teacher LLM spec, e.g. openai:MODEL@http://HOST:PORT/v1")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--tasks", default="rewrite,extract", help="comma list from {rewrite,extract} (default both)")
    p.add_argument("--chunking", choices=["passage", "tokens"], default="passage",
                   help="passage: one chunk per document (default); tokens: RAPTOR-style chunks")
    p.add_argument("--chunk-tokens", type=int, default=100, help="chunk size with --chunking tokens")
    p.add_argument("--validation-fraction", type=float, default=0.2, help="share of documents held out")
    p.add_argument("--seed", type=int, default=224, help="seed of the train/validation split")
    p.add_argument("--limit", type=int, help="use only the first N documents")
    p.add_argument("--rewrite-max-tokens", type=int, default=512)
    p.add_argument("--extract-max-tokens", type=int, default=1024)
    p.add_argument("--max-attempts", type=int, default=2, help="extraction requests per chunk at most")
    _llm_options(p)
    p.set_defaults(func=run_make_data)

    p = sub.add_parser("train", help="LoRA fine-tuning on chat JSONL",
                       description="Train a LoRA adapter; writes adapter/, train_log.jsonl, loss_curve.png.")
    p.add_argument("--config", required=True,
                   help="TOML training config, or a bundled one: mistral-7b-instruct-v0.3, smollm2-135m-cpu")
    p.add_argument("--data", help="folder written by make-data (uses train.jsonl and validation.jsonl)")
    p.add_argument("--train", help="training chat JSONL (instead of --data)")
    p.add_argument("--validation", help="validation chat JSONL (optional)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--resume", nargs="?", const="latest", help="continue from 'latest' (default) or a checkpoint folder")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value, e.g. --set optim.max_steps=30 (repeatable)")
    add_common(p)
    p.set_defaults(func=run_train)

    p = sub.add_parser("evaluate", help="score extractors against held-out teacher data",
                       description="JSON validity, entity and proposition P/R/F1, rewrite scores and, with "
                                   "--corpus, the aggregate and pool statistics of a build's extraction stage.")
    p.add_argument("--data", required=True, help="validation.jsonl (or the make-data folder)")
    p.add_argument("--extractor", action="append", required=True, metavar="SPEC",
                   help="LLM spec to evaluate, e.g. hf:smollm2 or hf:smollm2+adapter=DIR (repeatable)")
    p.add_argument("--out", help="folder for eval.json and eval.md")
    p.add_argument("--max-examples", type=int, help="evaluate the first N examples only")
    p.add_argument("--max-tokens", type=int, help="cap each completion budget")
    p.add_argument("--similarity", choices=["token_f1", "rouge_l"], default="token_f1")
    p.add_argument("--threshold", type=float, default=0.5, help="minimum similarity of a matched proposition")
    p.add_argument("--corpus", help="small corpus for downstream statistics")
    p.add_argument("--limit", type=int, help="with --corpus: use only the first N documents")
    p.add_argument("--rewrite-max-tokens", type=int, default=512, help="with --corpus: as in the build")
    p.add_argument("--extract-max-tokens", type=int, default=1024, help="with --corpus: as in the build")
    p.add_argument("--max-attempts", type=int, default=2, help="with --corpus: as in the build")
    _llm_options(p)
    p.set_defaults(func=run_evaluate)


def _llm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", help="LLM call cache folder (make-data default: OUT/cache)")
    p.add_argument("--llm-batch-size", type=int, help="batch size of local hf: models")
    p.add_argument("--device", help="device of local hf: models (auto, cpu, cuda)")
    add_common(p)


def _llm_config(args: argparse.Namespace):  # noqa: ANN202 - LLMConfig
    from sirerag.core.config import LLMConfig

    values: dict[str, Any] = {}
    if args.llm_batch_size:
        values["batch_size"] = args.llm_batch_size
    if args.device:
        values["device"] = args.device
    return LLMConfig(**values)


def run_make_data(args: argparse.Namespace) -> int:
    from sirerag.core.config import ChunkingConfig

    from sirerag_finetune.make_data import make_teacher_data

    chunking = ChunkingConfig(mode=args.chunking, max_tokens=args.chunk_tokens)
    card = make_teacher_data(
        Path(args.corpus), args.out, teacher=args.teacher, llm_config=_llm_config(args), cache_dir=args.cache,
        chunking=chunking, tasks=[t.strip() for t in args.tasks.split(",") if t.strip()],
        validation_fraction=args.validation_fraction, seed=args.seed, limit=args.limit,
        rewrite_max_tokens=args.rewrite_max_tokens, extract_max_tokens=args.extract_max_tokens,
        max_attempts=args.max_attempts, show_progress=progress_enabled(args))
    ex = card["examples"]
    print(f"teacher data written to {args.out}: {ex['train']['total']} train / {ex['validation']['total']} "
          f"validation examples; {card['rejected']['total']} teacher outputs rejected (see data_card.md)")
    return 0


def run_train(args: argparse.Namespace) -> int:
    from sirerag.core.errors import ConfigError

    from sirerag_finetune.config import load_train_config
    from sirerag_finetune.train import train_lora

    if bool(args.data) == bool(args.train):
        raise ConfigError("give either --data DIR (from make-data) or --train FILE, not both or neither")
    train_path, validation = (Path(args.data) / "train.jsonl", Path(args.data) / "validation.jsonl") \
        if args.data else (Path(args.train), Path(args.validation) if args.validation else None)
    if validation is not None and (not validation.is_file() or validation.stat().st_size == 0):
        validation = None
    config = load_train_config(args.config).with_overrides(args.set).validate()
    result = train_lora(config, train_path, args.out, validation_path=validation, resume=args.resume,
                        show_progress=progress_enabled(args))
    print(f"adapter: {result.adapter_dir}  ({result.steps} steps, loss {result.first_loss:.4f} -> "
          f"{result.final_loss:.4f}" + (f", validation loss {result.eval_loss:.4f}" if result.eval_loss else "") + ")")
    print(f"log: {result.log_path}  curve: {result.plot_path}")
    print(f"use it: sirerag build CORPUS --out INDEX --extractor-llm '{result.summary['serve_spec']}'")
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from sirerag.core.config import ExtractionConfig
    from sirerag.corpus.load import load_corpus

    from sirerag_finetune.evaluate import evaluate_extractor, report_markdown, write_report

    data = Path(args.data)
    data = data / "validation.jsonl" if data.is_dir() else data
    corpus = None
    if args.corpus:
        corpus = load_corpus(args.corpus)[: args.limit] if args.limit else load_corpus(args.corpus)
    extraction = ExtractionConfig(extractor="llm", rewrite_max_tokens=args.rewrite_max_tokens,
                                  extract_max_tokens=args.extract_max_tokens, max_attempts=args.max_attempts)
    reports = [evaluate_extractor(spec, data, llm_config=_llm_config(args), cache_dir=args.cache,
                                  max_examples=args.max_examples, max_tokens=args.max_tokens,
                                  similarity=args.similarity, threshold=args.threshold, corpus=corpus,
                                  extraction=extraction, show_progress=progress_enabled(args))
               for spec in args.extractor]
    if args.out:
        write_report(reports, args.out)
    sys.stdout.write(report_markdown(reports))
    if not args.out:
        print(json.dumps(reports, indent=2))
    return 0
