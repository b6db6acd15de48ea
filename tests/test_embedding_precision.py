"""``embedder.precision``: bfloat16 where the CPU has bfloat16 instructions, float32 elsewhere, its own
cache keys and manifest spec, and updates that keep the precision an index was embedded in."""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from sirerag.cli.build import config_from_args, register
from sirerag.core.config import BuildConfig, EmbedderConfig
from sirerag.core.errors import ConfigError
from sirerag.embedding import EmbeddingCache, load_embedder, make_embedder
from sirerag.embedding import precision as prec
from sirerag.pipeline.build import check_specs

pytest.importorskip("sentence_transformers")

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
         "Marie Curie won two Nobel Prizes, in physics and in chemistry.",
         "A short one.",
         "The river Thames flows through London and reaches the North Sea at its estuary."]
ZEN4 = {"_is_avx2_supported": True, "_is_avx512_bf16_supported": True, "_is_amx_tile_supported": False}
OLDER = {"_is_avx2_supported": True, "_is_avx512_bf16_supported": False, "_is_amx_tile_supported": False}
SAPPHIRE_RAPIDS = {"_is_avx512_bf16_supported": False, "_is_amx_tile_supported": True}


@pytest.fixture
def cpu(monkeypatch):
    """Answer torch's CPU probes as a given CPU would: ``cpu({probe: answer})``."""
    def use(probes: dict[str, bool]) -> None:
        fake = SimpleNamespace(**{name: (lambda answer=answer: answer) for name, answer in probes.items()})
        monkeypatch.setattr(prec, "_torch_cpu", lambda: fake)
        prec.native_bf16.cache_clear()
    yield use
    prec.native_bf16.cache_clear()


def test_auto_chooses_bfloat16_only_where_the_cpu_has_its_instructions(cpu, caplog):
    cpu(ZEN4)
    assert prec.native_bf16() and prec.resolve_precision("auto") == "bfloat16"
    assert prec.resolve_precision("float32") == "float32"
    cpu(SAPPHIRE_RAPIDS)
    assert prec.resolve_precision("auto") == "bfloat16"
    cpu(OLDER)
    assert not prec.native_bf16() and prec.resolve_precision("auto") == "float32"
    with caplog.at_level(logging.WARNING, logger="sirerag.embedding.precision"):
        assert prec.resolve_precision("bfloat16") == "bfloat16"  # asked for: honoured, with a warning
    assert "without bfloat16 instructions" in caplog.text
    cpu({})  # a torch without the probes
    assert prec.resolve_precision("auto") == "float32"


def test_bfloat16_vectors_stay_within_cosine_1e_4_of_float32_under_their_own_spec():
    fp32 = make_embedder("minilm", precision="float32")
    bf16 = make_embedder("minilm", precision="bfloat16")
    assert fp32.spec == "st:all-MiniLM-L6-v2" and bf16.spec == "st:all-MiniLM-L6-v2#bf16"
    a, b = fp32.encode_documents(TEXTS), bf16.encode_documents(TEXTS)
    assert b.dtype == np.float32 and b.shape == a.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    cosines = (a * b).sum(axis=1)
    assert cosines.min() > 0.9999 and not np.array_equal(a, b)  # the products really ran in bfloat16
    assert fp32.model is bf16.model  # one loaded model: autocast changes the computation, not the weights
    np.testing.assert_array_equal(fp32.encode_documents(TEXTS), a)  # and float32 is float32 after it


def test_the_two_precisions_are_cached_apart(tmp_path):
    for precision in ("float32", "bfloat16"):
        cached = load_embedder("minilm", cache_dir=tmp_path, show_progress=False, precision=precision)
        cached.encode_documents(TEXTS)
        cached.cache.close()
    cache = EmbeddingCache(tmp_path)
    try:
        assert {(row["spec"], row["entries"]) for row in cache.summary()} == {
            ("st:all-MiniLM-L6-v2", 4), ("st:all-MiniLM-L6-v2#bf16", 4)}
    finally:
        cache.close()


def test_precision_is_checked_before_any_model_loads():
    with pytest.raises(ConfigError, match=r"^embedder\.precision must be one of 'auto', 'float32', 'bfloat16', "
                                          r"'int8', got 'float16'"):
        BuildConfig(embedder=EmbedderConfig(precision="float16")).validate()
    with pytest.raises(ConfigError, match=r"^embedder\.precision must be 'auto' or 'float32' for the openai "
                                          r"embedder"):  # the build's and the dry run's check of the specs
        check_specs(BuildConfig(embedder=EmbedderConfig(spec="openai:text-embedding-3-small",
                                                        precision="bfloat16")).validate())
    with pytest.raises(ConfigError, match=r"^precision must be 'auto' or 'float32' for the minilm-onnx embedder"):
        make_embedder("minilm-onnx", precision="bfloat16")
    assert BuildConfig.from_dict({"embedder": {"precision": "float32"}}).embedder.precision == "float32"
    assert EmbedderConfig().precision == "auto"


def test_the_build_command_takes_precision(tmp_path):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["build", "c.jsonl", "--out", str(tmp_path), "--precision", "bfloat16"])
    assert config_from_args(args).embedder.precision == "bfloat16"
    assert config_from_args(parser.parse_args(["build", "c.jsonl", "--embedder", "minilm"])).embedder == EmbedderConfig()


@pytest.mark.slow
def test_a_build_records_its_precision_and_an_update_keeps_it(cpu, tmp_path):
    from sirerag.cli.main import main
    from sirerag.pool.loaded import load_index

    lines = (ROOT / "data" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    (tmp_path / "old.jsonl").write_text("\n".join(lines[:12]) + "\n", encoding="utf-8")
    (tmp_path / "new.jsonl").write_text("\n".join(lines[12:14]) + "\n", encoding="utf-8")
    cpu(OLDER)  # built where auto means float32 ...
    index = tmp_path / "index"
    assert main(["build", str(tmp_path / "old.jsonl"), "--out", str(index), "--trees", "none", "--quiet"]) == 0
    manifest = json.loads((index / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["embedder"]["spec"] == "st:all-MiniLM-L6-v2" and manifest["config"]["embedder"]["precision"] == "auto"
    before = {e.id for e in load_index(index).pool.entries}
    cpu(ZEN4)  # ... and updated where auto would mean bfloat16: the new passages are embedded in float32
    assert main(["add", str(index), str(tmp_path / "new.jsonl"), "--quiet"]) == 0
    updated = load_index(index)
    assert updated.manifest.embedder.spec == "st:all-MiniLM-L6-v2"
    rows = [i for i, e in enumerate(updated.pool.entries) if e.id not in before]
    assert rows
    fp32 = make_embedder("minilm", precision="float32")
    np.testing.assert_allclose(updated.pool.embeddings[rows],
                               fp32.encode_documents([updated.pool.entries[i].text for i in rows]), atol=1e-5)

    bf16_index = tmp_path / "bf16"
    assert main(["build", str(tmp_path / "old.jsonl"), "--out", str(bf16_index), "--trees", "none", "--quiet"]) == 0
    assert load_index(bf16_index).manifest.embedder.spec == "st:all-MiniLM-L6-v2#bf16"


def test_a_bfloat16_build_embeds_its_short_texts_with_the_same_torch_model(tmp_path):
    from sirerag.pipeline.models import Models

    config = BuildConfig(embedder=EmbedderConfig(precision="bfloat16")).validate()
    with Models(config, tmp_path / "cache") as models:
        assert models.short_text_embedder() is models.embedder()
        assert models.embedder().spec == "st:all-MiniLM-L6-v2#bf16"
    config = BuildConfig(embedder=EmbedderConfig(precision="float32")).validate()
    with Models(config, tmp_path / "cache") as models:
        assert models.short_text_embedder().spec in ("st:all-MiniLM-L6-v2#ort", "st:all-MiniLM-L6-v2")
