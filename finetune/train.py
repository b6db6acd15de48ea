"""LoRA fine-tuning of a chat model on chat-format JSONL (``finetune train``).

A plain PyTorch loop (AdamW, warm-up then cosine/linear/constant schedule,
gradient accumulation, gradient clipping) over a ``peft`` LoRA model. The loss
is the mean cross-entropy over assistant tokens of all examples in an optimiser
step (token-weighted, so accumulation gives the same loss as one big batch).
Runs on a CPU in float32 or on a CUDA GPU in bfloat16. The global random state
is forked for the run and restored afterwards; the caller's RNG is untouched.

Outputs under ``out``: ``adapter/`` (``save_pretrained``), ``train_log.jsonl``
(one row per logged step: step, epoch, loss, lr, tokens, seconds; eval rows add
``eval_loss``), ``loss_curve.png``, ``training_summary.json`` and
``checkpoints/step-NNNNNN/``.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from sirerag.core.errors import ConfigError, InputError, require
from sirerag.core.io import read_jsonl, write_json, write_jsonl

from sirerag_finetune.checkpoint import find_checkpoint, list_checkpoints, load_checkpoint, save_checkpoint
from sirerag_finetune.config import TrainConfig
from sirerag_finetune.modeling import (IGNORE_INDEX, EncodedExample, encode_rows, load_base_model, read_chat_jsonl,
                               serve_spec)

logger = logging.getLogger(__name__)

ADAPTER = "adapter"
LOG = "train_log.jsonl"
SUMMARY = "training_summary.json"
PLOT = "loss_curve.png"


@dataclass(frozen=True)
class TrainResult:
    """What a training run produced: paths, counts and losses, and the trained model
    (``peft`` model in eval mode) with its tokenizer for immediate use."""

    adapter_dir: Path
    log_path: Path
    plot_path: Path | None
    steps: int
    first_loss: float
    final_loss: float
    eval_loss: float | None
    summary: dict[str, Any]
    model: Any = field(default=None, repr=False, compare=False)
    tokenizer: Any = field(default=None, repr=False, compare=False)


def train_lora(
    config: TrainConfig,
    train_path: str | Path,
    out: str | Path,
    *,
    validation_path: str | Path | None = None,
    resume: str | Path | None = None,
    show_progress: bool = True,
) -> TrainResult:
    """Fine-tune ``config.model.base`` with LoRA on chat rows and save the adapter.

    Args:
        config: model, LoRA and optimisation settings (validated first).
        train_path: chat-format JSONL (``finetune make-data`` writes ``train.jsonl``).
        out: output folder (created).
        validation_path: optional JSONL for an eval loss every ``optim.eval_steps`` and at the end.
        resume: ``latest`` or a checkpoint folder to continue from.
        show_progress: show a tqdm bar.

    Returns:
        A :class:`TrainResult`; ``out/adapter`` loads with ``--llm hf:BASE+adapter=DIR``.

    Raises:
        ConfigError: invalid settings, or no example fits ``optim.max_length``.
        InputError: the training file is malformed.
    """
    import torch

    config.validate()
    out = Path(out)
    if resume is None and list_checkpoints(out):
        raise ConfigError(f"out {str(out)!r} already holds checkpoints of a run; pass --resume to continue it "
                          "or choose a new folder")
    peft = require("peft", "finetune", purpose="LoRA fine-tuning")
    transformers = require("transformers", "finetune", purpose="LoRA fine-tuning")
    opt = config.optim
    model, tokenizer = load_base_model(config.model)
    device = next(model.parameters()).device.type
    train, dropped = encode_rows(tokenizer, read_chat_jsonl(train_path), opt.max_length)
    if not train:
        raise ConfigError(f"optim.max_length must fit at least one training example, got {opt.max_length} "
                          f"({dropped} example(s) in {train_path} are all longer)")
    validation: list[EncodedExample] = []
    if validation_path is not None:
        validation, _ = encode_rows(tokenizer, read_chat_jsonl(validation_path), opt.max_length)

    if config.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    lora = peft.LoraConfig(r=config.lora.r, lora_alpha=config.lora.alpha, lora_dropout=config.lora.dropout,
                           target_modules=list(config.lora.target_modules), bias="none", task_type="CAUSAL_LM",
                           layers_to_transform=list(config.lora.layers) or None)
    model = peft.get_peft_model(model, lora)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    micro_per_epoch = math.ceil(len(train) / opt.batch_size)
    steps_per_epoch = max(1, math.ceil(micro_per_epoch / opt.gradient_accumulation_steps))
    total_steps = opt.max_steps or max(1, math.ceil(opt.epochs * steps_per_epoch))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=opt.learning_rate,
                                  weight_decay=opt.weight_decay)
    scheduler = transformers.get_scheduler(opt.lr_scheduler, optimizer,
                                           num_warmup_steps=int(opt.warmup_ratio * total_steps),
                                           num_training_steps=total_steps)
    pad_id = _pad_id(tokenizer)
    run_state = {"config": config.to_dict(), "train_path": str(train_path), "n_train": len(train),
                 "n_dropped_too_long": dropped, "total_steps": total_steps}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(opt.seed)
        start_step = 0
        if resume is not None:
            path = find_checkpoint(out, resume)
            saved = load_checkpoint(path, model, optimizer, scheduler, device)
            if saved["config"]["model"] != run_state["config"]["model"] or \
                    saved["config"]["lora"] != run_state["config"]["lora"]:
                raise ConfigError(f"resume: checkpoint {path} was trained with a different [model]/[lora] config")
            start_step = int(saved["step"])
        log = _read_log(out / LOG, upto=start_step)
        model.train()
        started = time.perf_counter()
        stream = _micro_batches(train, opt.batch_size, opt.seed, start=start_step * opt.gradient_accumulation_steps)
        bar = _progress(total_steps, start_step, show_progress)
        for step in range(start_step + 1, total_steps + 1):
            batches = [next(stream) for _ in range(opt.gradient_accumulation_steps)]
            n_tokens = sum(sum(1 for x in ex.labels if x != IGNORE_INDEX) for batch in batches for ex in batch)
            loss_sum = 0.0
            for batch in batches:
                input_ids, attention, labels = _collate(batch, pad_id, device)
                loss = _token_loss_sum(model, input_ids, attention, labels)
                (loss / n_tokens).backward()
                loss_sum += float(loss.detach())
            if opt.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], opt.max_grad_norm)
            lr = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            row: dict[str, Any] = {"step": step, "epoch": round(step / steps_per_epoch, 4),
                                   "loss": round(loss_sum / n_tokens, 6), "lr": lr, "tokens": n_tokens,
                                   "seconds": round(time.perf_counter() - started, 2)}
            if validation and opt.eval_steps and step % opt.eval_steps == 0 and step != total_steps:
                row["eval_loss"] = round(evaluation_loss(model, validation, pad_id, device), 6)
            if step % opt.logging_steps == 0 or step == total_steps or "eval_loss" in row:
                log.append(row)
                write_jsonl(out / LOG, log)
            bar.update(1)
            bar.set_postfix(loss=row["loss"])
            if opt.save_steps and step % opt.save_steps == 0 and step != total_steps:
                save_checkpoint(out, step, model, optimizer, scheduler, run_state, opt.save_total_limit)
        bar.close()
        eval_loss = round(evaluation_loss(model, validation, pad_id, device), 6) if validation else None
        if eval_loss is not None and log:
            log[-1]["eval_loss"] = eval_loss
            write_jsonl(out / LOG, log)
        save_checkpoint(out, total_steps, model, optimizer, scheduler, run_state, opt.save_total_limit)
    model.save_pretrained(str(out / ADAPTER), save_embedding_layers=False)
    model.eval()
    plot = plot_loss_curve(log, out / PLOT)
    losses = [r["loss"] for r in log]
    summary = {**run_state, "base": config.model.base, "trainable_parameters": trainable,
               "steps": total_steps, "resumed_from_step": start_step, "first_loss": losses[0] if losses else None,
               "final_loss": losses[-1] if losses else None, "eval_loss": eval_loss,
               "n_validation": len(validation), "seconds": round(time.perf_counter() - started, 2),
               "adapter": str((out / ADAPTER).resolve()),
               "serve_spec": serve_spec(config.model, out / ADAPTER)}
    write_json(out / SUMMARY, summary)
    logger.info("adapter saved to %s (%d steps, loss %.4f -> %.4f)", out / ADAPTER, total_steps,
                summary["first_loss"] or 0.0, summary["final_loss"] or 0.0)
    return TrainResult(adapter_dir=out / ADAPTER, log_path=out / LOG, plot_path=plot, steps=total_steps,
                       first_loss=float(summary["first_loss"]), final_loss=float(summary["final_loss"]),
                       eval_loss=eval_loss, summary=summary, model=model, tokenizer=tokenizer)


def _pad_id(tokenizer: Any) -> int:
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0):
        if candidate is not None:
            return int(candidate)
    return 0  # pragma: no cover


def _micro_batches(examples: Sequence[EncodedExample], batch_size: int, seed: int,
                   start: int = 0) -> Iterator[list[EncodedExample]]:
    """Endless micro-batches; epoch ``e`` shuffles with seed ``seed + e``. ``start`` skips that many,
    so a resumed run sees exactly the batches the uninterrupted run would have seen."""
    import torch

    per_epoch = math.ceil(len(examples) / batch_size)
    epoch, position = divmod(start, per_epoch)
    while True:
        order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        for b in range(position, per_epoch):
            yield [examples[i] for i in order[b * batch_size:(b + 1) * batch_size]]
        epoch, position = epoch + 1, 0


def _collate(batch: Sequence[EncodedExample], pad_id: int, device: str) -> tuple[Any, Any, Any]:
    import torch

    width = max(len(ex.input_ids) for ex in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for i, ex in enumerate(batch):
        n = len(ex.input_ids)
        ids[i, :n] = torch.tensor(ex.input_ids)
        labels[i, :n] = torch.tensor(ex.labels)
        attention[i, :n] = 1
    return ids.to(device), attention.to(device), labels.to(device)


def _token_loss_sum(model: Any, input_ids: Any, attention: Any, labels: Any) -> Any:
    """Sum of next-token cross-entropy over labelled positions.

    Logits are computed only from the first labelled position on (``logits_to_keep``):
    the vocabulary projection of prompt tokens is wasted work, and large for small models.
    """
    import torch

    labelled = (labels != IGNORE_INDEX).any(dim=0).nonzero()
    first = int(labelled[0]) if len(labelled) else labels.shape[1] - 1
    keep = labels.shape[1] - max(first - 1, 0)
    logits = model(input_ids=input_ids, attention_mask=attention, logits_to_keep=keep).logits[:, :-1].float()
    targets = labels[:, labels.shape[1] - keep + 1:]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                             ignore_index=IGNORE_INDEX, reduction="sum")


def evaluation_loss(model: Any, examples: Sequence[EncodedExample], pad_id: int, device: str) -> float:
    """Token-weighted mean loss over ``examples`` (no gradient, dropout off, mode restored)."""
    import torch

    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for ex in examples:
            ids, attention, labels = _collate([ex], pad_id, device)
            total += float(_token_loss_sum(model, ids, attention, labels))
            tokens += ex.n_target_tokens - (1 if ex.labels[0] != IGNORE_INDEX else 0)
    model.train(was_training)
    return total / max(tokens, 1)


def _read_log(path: Path, upto: int) -> list[dict[str, Any]]:
    if upto == 0 or not path.is_file():
        return []
    try:
        return [r for r in read_jsonl(path) if int(r.get("step", 0)) <= upto]
    except InputError:
        logger.warning("could not read %s; starting a new training log", path)
        return []


def _progress(total: int, initial: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="lora", unit="step", disable=not enabled)


def plot_loss_curve(log: Sequence[dict[str, Any]], path: str | Path) -> Path | None:
    """Plot training (and eval) loss against step as a PNG; None without matplotlib.

    Uses a bare :class:`matplotlib.figure.Figure` (Agg canvas), never ``pyplot``, so no
    global backend is switched and no window opens."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        logger.warning("matplotlib is not installed; no loss curve written (pip install 'sirerag[finetune]')")
        return None
    from sirerag.core.io import atomic_path

    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([r["step"] for r in log], [r["loss"] for r in log], label="train loss")
    evals = [r for r in log if "eval_loss" in r]
    if evals:
        ax.plot([r["step"] for r in evals], [r["eval_loss"] for r in evals], "o-", label="validation loss")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("loss (assistant tokens)")
    ax.grid(alpha=0.3)
    ax.legend()
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fig.savefig(fh, format="png", bbox_inches="tight")
    return path

