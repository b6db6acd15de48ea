"""The local HF backend with the real SmolLM2-135M-Instruct from the shipped GGUF, and LoRA adapters."""
from __future__ import annotations

import copy
import gc

import pytest

from sirerag.core.config import LLMConfig
from sirerag.core.errors import ConfigError
from sirerag.llm.factory import describe_spec, load_llm
from sirerag.llm.prompts import QA_READER

pytestmark = pytest.mark.slow

CONFIG = LLMConfig(batch_size=4, device="cpu")


@pytest.fixture(scope="module")
def smollm2():
    return load_llm("hf:smollm2", config=CONFIG)


def requests(max_tokens: int = 8):
    facts = [("Paris is the capital of France.", "What is the capital of France?"),
             ("The Nile flows into the Mediterranean Sea.", "Into which sea does the Nile flow?"),
             ("Ada Lovelace wrote the first published computer program.", "Who wrote the first program?")]
    return [QA_READER.request(max_tokens=max_tokens, context=c, question=q) for c, q in facts]


def test_generates_greedily_in_batches(smollm2):
    assert smollm2.spec == "hf:smollm2"
    batch = smollm2.complete_many(requests())
    for out in batch:
        assert out.text and 0 < out.completion_tokens <= 8 and out.prompt_tokens > 20
        assert out.finish_reason in ("stop", "length")
    singles = [smollm2.complete(r) for r in requests()]
    assert [s.text for s in singles] == [b.text for b in batch]  # left padding does not change greedy output


def test_lora_adapter(smollm2, tmp_path):
    peft = pytest.importorskip("peft")
    target = ["q_proj", "v_proj"]
    zero, noisy = tmp_path / "zero", tmp_path / "noisy"
    for folder, init in ((zero, True), (noisy, False)):  # True: B = 0, the adapter changes nothing
        lora = peft.LoraConfig(r=4, lora_alpha=16, target_modules=target, init_lora_weights=init)
        peft.get_peft_model(copy.deepcopy(smollm2.lm), lora).save_pretrained(str(folder))
    base = [c.text for c in smollm2.complete_many(requests(6)[:2])]
    with_zero = load_llm(f"hf:smollm2+adapter={zero}", config=CONFIG)
    with_noise = load_llm(f"hf:smollm2+adapter={noisy}", config=CONFIG)
    assert with_zero.spec.startswith(f"hf:smollm2+adapter={zero}#")
    assert len({smollm2.spec, with_zero.spec, with_noise.spec}) == 3  # so their cache entries differ
    for llm, spec in ((smollm2, "hf:smollm2"), (with_noise, f"hf:smollm2+adapter={noisy}")):
        assert describe_spec(spec) == (llm.spec, llm.model)  # what the dry run uses to find cached calls
    assert [c.text for c in with_zero.complete_many(requests(6)[:2])] == base
    assert [c.text for c in with_noise.complete_many(requests(6)[:2])] != base
    assert [c.text for c in smollm2.complete_many(requests(6)[:2])] == base  # the base weights were not touched

    # models are shared while in use and freed when the last backend using them is gone
    from sirerag.llm import hf_backend

    assert load_llm("hf:smollm2", config=CONFIG).lm is smollm2.lm
    key = (with_noise.path, with_noise.gguf_file, with_noise.adapter_hash, "cpu")
    assert key in hf_backend._LOADED
    del with_zero, with_noise, llm
    gc.collect()
    assert key not in hf_backend._LOADED


def test_bad_model_paths_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="GGUF file not found"):
        load_llm(f"hf:{tmp_path}/missing.gguf", config=CONFIG)
    with pytest.raises(ConfigError, match="model path not found"):
        load_llm(f"hf:{tmp_path}/missing_dir", config=CONFIG)
    with pytest.raises(ConfigError, match="adapter_config.json"):
        load_llm(f"hf:smollm2+adapter={tmp_path}", config=CONFIG)
