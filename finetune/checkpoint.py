"""Training checkpoints without pickle.

A checkpoint is a folder ``checkpoints/step-000040/`` holding the adapter
(``save_pretrained``: ``adapter_model.safetensors`` + ``adapter_config.json``),
the optimiser tensors and random-number state in ``optimizer.safetensors``, and
everything else (step, optimiser hyper-parameters, scheduler state, the
training config) in ``state.json``. ``torch.save`` is never used, so loading a
checkpoint never unpickles anything.
"""
from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import Any

from sirerag.core.errors import ConfigError, InputError
from sirerag.core.io import atomic_dir, read_json, write_json

logger = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
STATE = "state.json"
OPTIMIZER = "optimizer.safetensors"


def checkpoint_dir(out: Path, step: int) -> Path:
    return out / CHECKPOINTS / f"step-{step:06d}"


def list_checkpoints(out: Path) -> list[Path]:
    """Complete checkpoints under ``out``, oldest first."""
    folder = out / CHECKPOINTS
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("step-*") if re.fullmatch(r"step-\d{6}", p.name) and (p / STATE).is_file())


def save_checkpoint(out: Path, step: int, model: Any, optimizer: Any, scheduler: Any,
                    state: dict[str, Any], keep: int) -> Path:
    """Write checkpoint ``step`` and delete all but the newest ``keep`` checkpoints."""
    target = checkpoint_dir(out, step)
    with atomic_dir(target) as tmp:  # a crash never leaves a half-written step-* folder
        _write_checkpoint(tmp, step, model, optimizer, scheduler, state)
    for old in list_checkpoints(out)[:-keep]:
        shutil.rmtree(old)
    logger.info("checkpoint written: %s", target)
    return target


def _write_checkpoint(tmp: Path, step: int, model: Any, optimizer: Any, scheduler: Any,
                      state: dict[str, Any]) -> None:
    import torch
    from safetensors.torch import save_file

    model.save_pretrained(str(tmp), save_embedding_layers=False)
    tensors: dict[str, Any] = {"rng.cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = s
    opt = optimizer.state_dict()
    scalars: dict[str, dict[str, Any]] = {}
    for index, values in opt["state"].items():
        for name, value in values.items():
            if torch.is_tensor(value):
                tensors[f"state.{index}.{name}"] = value.detach().contiguous().cpu()
            else:
                scalars.setdefault(str(index), {})[name] = value
    save_file(tensors, str(tmp / OPTIMIZER))
    write_json(tmp / STATE, {**state, "step": step, "optimizer": {"param_groups": opt["param_groups"],
                                                                  "scalars": scalars},
                             "scheduler": scheduler.state_dict()})


def find_checkpoint(out: Path, resume: str | Path) -> Path:
    """``latest`` -> the newest checkpoint under ``out``; otherwise ``resume`` is a checkpoint folder.

    Raises:
        ConfigError: no checkpoint is found.
    """
    if str(resume) == "latest":
        found = list_checkpoints(out)
        if not found:
            raise ConfigError(f"resume must name a checkpoint folder: 'latest' found none under {out / CHECKPOINTS}")
        return found[-1]
    path = Path(resume)
    if not (path / STATE).is_file():
        raise ConfigError(f"resume must be 'latest' or a checkpoint folder containing {STATE}, got {str(resume)!r}")
    return path


def load_checkpoint(path: Path, model: Any, optimizer: Any, scheduler: Any, device: str) -> dict[str, Any]:
    """Restore adapter weights, optimiser, scheduler and RNG state; returns ``state.json``."""
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    state = read_json(path / STATE)
    adapter_file = path / "adapter_model.safetensors"
    if not adapter_file.is_file():
        raise InputError(f"{path}: adapter_model.safetensors is missing; the checkpoint is incomplete")
    result = set_peft_model_state_dict(model, load_file(str(adapter_file), device=device))
    unexpected = getattr(result, "unexpected_keys", [])
    if unexpected:
        raise InputError(f"{adapter_file}: weights do not fit this model/LoRA config ({unexpected[:3]} ...)")
    tensors = load_file(str(path / OPTIMIZER))
    per_param: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, index, name = key.split(".", 2)
            per_param.setdefault(int(index), {})[name] = value.to(device)
    for index, values in state["optimizer"]["scalars"].items():
        per_param.setdefault(int(index), {}).update(values)
    optimizer.load_state_dict({"state": per_param, "param_groups": state["optimizer"]["param_groups"]})
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(tensors["rng.cpu"])
    if torch.cuda.is_available():
        cuda_states = [tensors[k] for k in sorted(k for k in tensors if k.startswith("rng.cuda."))]
        if cuda_states:
            torch.cuda.set_rng_state_all(cuda_states)
    logger.info("resumed from %s (step %d)", path, state["step"])
    return state
