"""The whole distillation loop on CPU with the real SmolLM2-135M-Instruct (shipped GGUF).

teacher data made by SmolLM2 itself -> LoRA training of SmolLM2 -> resume from a
checkpoint -> adapter reloaded (by our loader and by the build's hf: backend) ->
evaluation before/after -> the adapter as the extraction LLM of a real build.

SmolLM2-135M is a poor teacher: most of its answers are refused (echoes of the
prompt's example, drifting rewrites). Those rejections are real and asserted. So
that training has something to learn from, the training split is supplemented
with hand-written extractions for the same passages (``HAND_WRITTEN`` below), as
the data card says.
"""
from __future__ import annotations

import json
import shutil
import time

import pytest

from sirerag_finetune.config import load_train_config
from sirerag_finetune.dataset import extraction_example, read_examples, split_by_document, write_dataset
from sirerag.config import BuildConfig, ChunkingConfig, ExtractionConfig, LLMConfig
from sirerag.extraction import Fact
from sirerag.io import read_json, read_jsonl
from sirerag.types import Document, document_id

pytestmark = pytest.mark.slow

LLM = LLMConfig(batch_size=4, device="cpu")
PASSAGES = [
    ("Ada Lovelace", "Ada Lovelace was an English mathematician. She wrote the first published algorithm for "
                     "Charles Babbage's Analytical Engine in 1843."),
    ("Harwick Bridge", "The Harwick Bridge crosses the River Tame at Elmford. It was designed by Margaret Lowe "
                       "and opened in 1931."),
    ("Lake Baikal", "Lake Baikal is a rift lake in Siberia. It is the deepest lake in the world."),
    ("Tove Jansson", "Tove Jansson was a Finnish writer and painter. She created the Moomins, whose first "
                     "book appeared in 1945."),
]
DOCS = [Document(id=document_id(t, x), title=t, text=x) for t, x in PASSAGES]
# what a good teacher would answer for each passage (written by hand for this test)
HAND_WRITTEN = {
    "Ada Lovelace": [("Ada Lovelace was an English mathematician.", ["Ada Lovelace"]),
                     ("Ada Lovelace wrote the first published algorithm for the Analytical Engine in 1843.",
                      ["Ada Lovelace", "Analytical Engine", "1843"]),
                     ("Charles Babbage designed the Analytical Engine.", ["Charles Babbage", "Analytical Engine"])],
    "Harwick Bridge": [("The Harwick Bridge crosses the River Tame at Elmford.",
                        ["Harwick Bridge", "River Tame", "Elmford"]),
                       ("Margaret Lowe designed the Harwick Bridge.", ["Margaret Lowe", "Harwick Bridge"]),
                       ("The Harwick Bridge opened in 1931.", ["Harwick Bridge", "1931"])],
    "Lake Baikal": [("Lake Baikal is a rift lake in Siberia.", ["Lake Baikal", "Siberia"]),
                    ("Lake Baikal is the deepest lake in the world.", ["Lake Baikal"])],
    "Tove Jansson": [("Tove Jansson was a Finnish writer and painter.", ["Tove Jansson"]),
                     ("Tove Jansson created the Moomins.", ["Tove Jansson", "Moomins"]),
                     ("The first Moomins book appeared in 1945.", ["Moomins", "1945"])],
}
BUDGETS = {"rewrite_max_tokens": 64, "extract_max_tokens": 96, "max_attempts": 1}
EXTRACTION = ExtractionConfig(extractor="llm", **BUDGETS)
STEPS = 24
TIMINGS: dict[str, float] = {}
DOWNSTREAM: dict[str, dict] = {}


@pytest.fixture(scope="module")
def llm_cache(tmp_path_factory):
    """One call cache for the student's downstream evaluation and the build (same requests)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    from sirerag_finetune.data import make_teacher_data

    out = tmp_path_factory.mktemp("teacher")
    start = time.perf_counter()
    card = make_teacher_data(DOCS, out, teacher="hf:smollm2", llm_config=LLM, validation_fraction=0.25, seed=0,
                             show_progress=False, **BUDGETS)
    TIMINGS["make_data"] = time.perf_counter() - start
    return out, card


@pytest.fixture(scope="module")
def dataset(teacher, tmp_path_factory):
    """The teacher's examples plus the hand-written ones, split by document as make-data splits."""
    folder, card = teacher
    examples = read_examples(folder / "train.jsonl") + read_examples(folder / "validation.jsonl")
    extra = [extraction_example(d.text, [Fact(f, tuple(e)) for f, e in HAND_WRITTEN[d.title]], doc_id=d.id,
                                chunk_id=f"hand-{d.id}", max_tokens=BUDGETS["extract_max_tokens"]) for d in DOCS]
    out = tmp_path_factory.mktemp("data")
    train, validation = split_by_document(examples + extra, 0.25, seed=0)
    write_dataset(out, train, validation, extra={**card, "supplement": f"{len(extra)} hand-written extraction "
                                                 "examples added by tests/test_finetune_loop.py"})
    return out, train, validation


@pytest.fixture(scope="module")
def trained(dataset, tmp_path_factory):
    from sirerag_finetune.train import train_lora

    folder, _, _ = dataset
    config = load_train_config("smollm2-135m-cpu").with_overrides(
        [f"optim.max_steps={STEPS}", "optim.save_steps=20", "optim.eval_steps=0"])
    out = tmp_path_factory.mktemp("run")
    start = time.perf_counter()
    result = train_lora(config, folder / "train.jsonl", out, validation_path=folder / "validation.jsonl",
                        show_progress=False)
    TIMINGS["train"] = time.perf_counter() - start
    return config, result


def test_teacher_data_accounts_for_every_output(teacher, monkeypatch):
    folder, card = teacher
    examples = read_examples(folder / "train.jsonl") + read_examples(folder / "validation.jsonl")
    rejected = list(read_jsonl(folder / "rejected.jsonl"))
    # every chunk gave exactly one rewrite and one extraction outcome: kept or rejected with a reason
    for stage in ("rewrite", "extract"):
        kept = sum(1 for e in examples if e.task == stage)
        refused = [r for r in rejected if r["stage"] == stage]
        assert kept + len(refused) == len(DOCS), stage
        assert all(r["reason"] for r in refused)
    assert card["rejected"]["total"] == len(rejected) and card["teacher"] == "hf:smollm2"
    assert card["prompt_versions"] == {"rewrite": "coref_rewrite@1", "extract": "extract_propositions@1"}
    assert (folder / "data_card.md").read_text().count("×") == len(card["rejected"]["by_reason"])
    train_docs = {e.doc_id for e in read_examples(folder / "train.jsonl")}
    assert train_docs.isdisjoint(e.doc_id for e in read_examples(folder / "validation.jsonl"))
    # the call cache makes a second run free and identical
    from sirerag_finetune.data import make_teacher_data

    from sirerag.llm import hf_backend

    def no_generation(self, prompts, requests):  # noqa: ANN001, ANN202
        raise AssertionError("the teacher was asked again: the call cache did not answer")

    monkeypatch.setattr(hf_backend.HFLocalLLM, "_generate", no_generation)
    again = make_teacher_data(DOCS, folder, teacher="hf:smollm2", llm_config=LLM, validation_fraction=0.25, seed=0,
                              show_progress=False, **BUDGETS)
    assert again == card


def test_training_loss_decreases_and_writes_artifacts(trained):
    config, result = trained
    log = [json.loads(line) for line in result.log_path.read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, STEPS + 1))
    # one row per step, so an epoch is n_train consecutive steps over the same examples:
    # compare the token-weighted loss of the first and the last full epoch
    n = result.summary["n_train"]
    assert STEPS >= 2 * n

    def epoch_loss(rows):
        return sum(r["loss"] * r["tokens"] for r in rows) / sum(r["tokens"] for r in rows)

    first, last = epoch_loss(log[:n]), epoch_loss(log[(STEPS // n - 1) * n:(STEPS // n) * n])
    assert last < 0.6 * first, f"training loss did not decrease: {first:.3f} -> {last:.3f}"
    assert result.eval_loss is not None and result.eval_loss > 0
    assert (result.adapter_dir / "adapter_model.safetensors").is_file()
    assert json.loads((result.adapter_dir / "adapter_config.json").read_text())["r"] == config.lora.r
    assert result.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = result.adapter_dir.parent
    assert not [p for p in out.rglob("*") if p.suffix in (".pt", ".pth", ".bin", ".pkl")]  # nothing pickled
    assert [p.name for p in sorted((out / "checkpoints").iterdir())] == ["step-000020", f"step-{STEPS:06d}"]
    summary = read_json(out / "training_summary.json")
    assert summary["serve_spec"] == f"hf:smollm2+adapter={result.adapter_dir.resolve()}"


def test_resume_reproduces_the_uninterrupted_run(dataset, trained, tmp_path):
    from sirerag_finetune.train import train_lora

    config, result = trained
    folder, _, _ = dataset
    original = result.adapter_dir.parent
    shutil.copytree(original / "checkpoints" / "step-000020", tmp_path / "checkpoints" / "step-000020")
    rows = [json.loads(line) for line in (original / "train_log.jsonl").read_text().splitlines()]
    (tmp_path / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:20]))
    resumed = train_lora(config, folder / "train.jsonl", tmp_path, resume="latest", show_progress=False)
    again = [json.loads(line) for line in resumed.log_path.read_text().splitlines()]
    assert [r["step"] for r in again] == list(range(1, STEPS + 1))
    assert [r["loss"] for r in again[20:]] == pytest.approx([r["loss"] for r in rows[20:]], abs=1e-5)


def _generate(model, tokenizer, messages, max_new_tokens):
    import torch

    text = tokenizer.apply_chat_template([{"role": r, "content": c} for r, c in messages], tokenize=False,
                                         add_generation_prompt=True)
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=max_new_tokens, eos_token_id=model.generation_config.eos_token_id,
                             pad_token_id=model.generation_config.pad_token_id)
    return out[0, ids.shape[1]:].tolist()


def test_adapter_reloads_with_identical_outputs(dataset, trained):
    import torch

    from sirerag_finetune.modeling import load_adapter_model
    from sirerag.llm.base import LLMRequest
    from sirerag.llm.factory import load_llm

    config, result = trained
    _, _, validation = dataset
    messages = validation[0].messages[:-1]
    trained_ids = _generate(result.model, result.tokenizer, messages, 16)
    model, tokenizer = load_adapter_model(config.model, result.adapter_dir)
    assert _generate(model, tokenizer, messages, 16) == trained_ids
    probe = tokenizer("Lake Baikal is", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.allclose(model(probe).logits, result.model(probe).logits, atol=1e-5)
    # the build's backend (which merges the adapter into a copy of the base) answers the same
    served = load_llm(result.summary["serve_spec"], config=LLM)
    completion = served.complete(LLMRequest(messages=messages, max_tokens=16))
    eos = result.model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    cut = next((i for i, t in enumerate(trained_ids) if t in eos), len(trained_ids))
    assert completion.text == result.tokenizer.decode(trained_ids[:cut], skip_special_tokens=True).strip()


def test_evaluation_before_and_after(teacher, dataset, trained, llm_cache, tmp_path):
    from sirerag_finetune.evaluate import evaluate_extractor, write_report

    folder, _, validation = dataset
    _, result = trained
    reports = []
    # the base model is the teacher here: its answers to the teacher's own requests come from the call cache
    for spec, cache, corpus in (("hf:smollm2", teacher[0] / "cache", None),
                                (result.summary["serve_spec"], llm_cache / "llm", DOCS[:1])):
        start = time.perf_counter()
        reports.append(evaluate_extractor(spec, folder / "validation.jsonl", llm_config=LLM, cache_dir=cache,
                                          corpus=corpus, extraction=EXTRACTION, show_progress=False))
        TIMINGS[f"evaluate {spec[:20]}"] = time.perf_counter() - start
    write_report(reports, tmp_path)
    for report in reports:
        extract = report["extract"]
        assert extract["examples"] == sum(1 for e in validation if e.task == "extract") >= 1
        assert 0.0 <= extract["json_valid_rate"] <= 1.0
        for key in ("precision", "recall", "f1"):
            assert 0.0 <= extract["entities"][key] <= 1.0 and 0.0 <= extract["propositions"][key] <= 1.0
    assert reports[1]["extractor"].startswith("hf:smollm2+adapter=")
    downstream = reports[1]["downstream"]
    assert downstream["extraction"]["chunks"] == 1 and downstream["pool"]["leaves"] == 1
    assert downstream["pool"]["aggregates"] == downstream["aggregates"]["aggregates"]
    assert downstream["aggregates"]["propositions"] == downstream["extraction"]["propositions"]
    DOWNSTREAM.update(downstream)
    print("\n" + (tmp_path / "eval.md").read_text())  # shown with pytest -s: the before/after table
    print("timings (s):", {k: round(v, 1) for k, v in TIMINGS.items()})


def test_build_uses_the_adapter_for_extraction(trained, llm_cache, tmp_path):
    from dataclasses import replace

    from sirerag.pipeline.build import build_index

    _, result = trained
    config = BuildConfig(trees=("relatedness",), chunking=ChunkingConfig(mode="passage"),
                         extraction=replace(EXTRACTION, llm=result.summary["serve_spec"]))
    report = build_index(DOCS[:1], tmp_path / "index", config, cache_dir=llm_cache, show_progress=False)
    manifest = read_json(tmp_path / "index" / "manifest.json")
    assert manifest["extractor"].startswith(f"llm:hf:smollm2+adapter={result.adapter_dir.resolve()}#")
    assert report.counts["extraction"]["chunks"] == 1
    rewrites = list(read_jsonl(tmp_path / "index" / "rewrites.jsonl"))
    assert len(rewrites) == 1 and rewrites[0]["rewrite"]  # the adapter answered the rewrite stage too
    if DOWNSTREAM:  # the evaluation ran the same extraction stage through the same cache
        assert report.counts["extraction"]["propositions"] == DOWNSTREAM["extraction"]["propositions"]


def test_loss_mask_covers_exactly_the_assistant_turns(trained):
    from sirerag_finetune.modeling import IGNORE_INDEX, encode_chat

    _, result = trained
    tokenizer = result.tokenizer
    messages = [{"role": "user", "content": "Name a lake."}, {"role": "assistant", "content": "Lake Baikal."},
                {"role": "user", "content": "Where is it?"}, {"role": "assistant", "content": "In Siberia."}]
    example = encode_chat(tokenizer, messages)
    full = tokenizer.apply_chat_template(messages, tokenize=False)
    assert list(example.input_ids) == tokenizer(full, add_special_tokens=False)["input_ids"]
    spans, current = [], []
    for token, label in zip(example.input_ids, example.labels):
        if label == IGNORE_INDEX:
            if current:
                spans.append(current)
            current = []
        else:
            assert label == token
            current.append(token)
    spans.append(current)
    assert [tokenizer.decode(s) for s in spans] == ["Lake Baikal.<|im_end|>\n", "In Siberia.<|im_end|>\n"]
