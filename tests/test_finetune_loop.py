"""The whole distillation loop on CPU with the real SmolLM2-135M-Instruct (shipped GGUF).

teacher data made by SmolLM2 itself -> LoRA training of SmolLM2 -> resume from a
checkpoint -> adapter reloaded (by our loader and by the build's hf: backend) ->
evaluation before/after -> the adapter as the extraction LLM of a real build.

SmolLM2-135M is a poor teacher: many of its answers are refused (echoes of the
prompt's example, drifting rewrites); every output is accounted for, kept or refused
with a reason. So that training has something to learn from, the training split is
supplemented with hand-written extractions for the same passages (``HAND_WRITTEN``
below) and with hand-annotated benchmark sentences (the shortest ``dev`` sentences of
tests/data/tagger_gold.jsonl as one-fact answers, as scripts/finetune_demo_gold.py
does), as the data card says. Held-out ``heldout`` sentences of that file, never
trained on, measure that the adapter is better than the base model.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from finetune.config import load_train_config
from finetune.dataset import extraction_example, read_examples, split_by_document, write_dataset
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
GOLD = Path(__file__).parent / "data" / "tagger_gold.jsonl"
N_GOLD_TRAIN, N_GOLD_HELDOUT = 6, 8  # the shortest sentences of each split (at least 5 words)
GOLD_TOKENS = 128  # completion budget of a one-fact answer
STEPS = 32  # two epochs or more: at most 6 teacher + 3 hand-written + 6 gold training examples


def gold_examples(split: str, n: int) -> list:
    """One-fact extraction examples from hand-annotated sentences (the sentence is the fact)."""
    rows = sorted((r for r in read_jsonl(GOLD) if r["split"] == split and len(r["sentence"].split()) >= 5),
                  key=lambda r: (len(r["sentence"]), r["sentence"]))[:n]
    return [extraction_example(r["sentence"], [Fact(r["sentence"], tuple(r["entities"]))],
                               doc_id=f"gold-{split}-{i}", chunk_id=f"gold-{split}-{i}", max_tokens=GOLD_TOKENS)
            for i, r in enumerate(rows)]


@pytest.fixture(scope="module")
def llm_cache(tmp_path_factory):
    """One call cache for the student's downstream evaluation and the build (same requests)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    from finetune.data import make_teacher_data

    out = tmp_path_factory.mktemp("teacher")
    card = make_teacher_data(DOCS, out, teacher="hf:smollm2", llm_config=LLM, validation_fraction=0.25, seed=0,
                             show_progress=False, **BUDGETS)
    return out, card


@pytest.fixture(scope="module")
def dataset(teacher, tmp_path_factory):
    """The teacher's examples plus the hand-written ones, split by document as make-data splits,
    plus hand-annotated sentences for training only."""
    folder, card = teacher
    examples = read_examples(folder / "train.jsonl") + read_examples(folder / "validation.jsonl")
    extra = [extraction_example(d.text, [Fact(f, tuple(e)) for f, e in HAND_WRITTEN[d.title]], doc_id=d.id,
                                chunk_id=f"hand-{d.id}", max_tokens=BUDGETS["extract_max_tokens"]) for d in DOCS]
    out = tmp_path_factory.mktemp("data")
    train, validation = split_by_document(examples + extra, 0.25, seed=0)
    train += gold_examples("dev", N_GOLD_TRAIN)
    write_dataset(out, train, validation, extra={
        **card, "supplement": f"{len(extra)} hand-written extraction examples and {N_GOLD_TRAIN} hand-annotated "
                              f"sentences ({GOLD.name}, dev) added by tests/test_finetune_loop.py"})
    return out, train, validation


@pytest.fixture(scope="module")
def gold_heldout(tmp_path_factory):
    """Held-out hand-annotated sentences as a validation split (never trained on)."""
    out = tmp_path_factory.mktemp("gold")
    write_dataset(out, [], gold_examples("heldout", N_GOLD_HELDOUT), extra={"teacher": f"hand annotations ({GOLD.name})"})
    return out / "validation.jsonl"


@pytest.fixture(scope="module")
def trained(dataset, tmp_path_factory):
    from finetune.train import train_lora

    folder, _, _ = dataset
    config = load_train_config("smollm2-135m-cpu").with_overrides(
        [f"optim.max_steps={STEPS}", "optim.save_steps=20", "optim.eval_steps=0"])
    out = tmp_path_factory.mktemp("run")
    result = train_lora(config, folder / "train.jsonl", out, validation_path=folder / "validation.jsonl",
                        show_progress=False)
    return config, result


@pytest.fixture(scope="module")
def evaluations(teacher, dataset, trained, gold_heldout, llm_cache, tmp_path_factory):
    """Reports of the base model and the adapter: on the teacher's validation split (the adapter's
    with downstream statistics over one passage) and on the held-out hand-annotated sentences."""
    from finetune.evaluate import evaluate_extractor, write_report

    folder, _, _ = dataset
    _, result = trained
    adapter = result.summary["serve_spec"]
    # the base model is the teacher here: its answers to the teacher's own requests come from the call cache
    teacher_split = [
        evaluate_extractor("hf:smollm2", folder / "validation.jsonl", llm_config=LLM, cache_dir=teacher[0] / "cache",
                           extraction=EXTRACTION, show_progress=False),
        evaluate_extractor(adapter, folder / "validation.jsonl", llm_config=LLM, cache_dir=llm_cache / "llm",
                           corpus=DOCS[:1], extraction=EXTRACTION, show_progress=False)]
    gold = [evaluate_extractor(spec, gold_heldout, llm_config=LLM, cache_dir=llm_cache / "gold", max_tokens=GOLD_TOKENS,
                               show_progress=False) for spec in ("hf:smollm2", adapter)]
    out = tmp_path_factory.mktemp("eval")
    write_report(teacher_split, out / "teacher")
    write_report(gold, out / "gold")
    return {"teacher": teacher_split, "gold": gold, "out": out}


def test_teacher_data_accounts_for_every_output(teacher):
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
    # the call cache makes a second run free (no model call) and identical
    from finetune.data import make_teacher_data
    from sirerag.llm.cache import CallCache

    again = make_teacher_data(DOCS, folder, teacher="hf:smollm2", llm_config=LLM, validation_fraction=0.25, seed=0,
                              show_progress=False, **BUDGETS)
    second = CallCache(folder / "cache").stats()["last_run"]
    assert again == card
    assert second["misses"] == second["failures"] == 0 and second["hits"] >= 2 * len(DOCS)  # rewrite + extract


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
    from finetune.train import train_lora

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

    from finetune.modeling import load_adapter_model
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


def test_evaluation_before_and_after(dataset, evaluations):
    _, _, validation = dataset
    reports = evaluations["teacher"] + evaluations["gold"]
    for report in reports:
        extract = report["extract"]
        assert extract["examples"] >= 1 and 0.0 <= extract["json_valid_rate"] <= 1.0
        for key in ("precision", "recall", "f1"):
            assert 0.0 <= extract["entities"][key] <= 1.0 and 0.0 <= extract["propositions"][key] <= 1.0
    for report in evaluations["teacher"]:
        assert report["extract"]["examples"] == sum(1 for e in validation if e.task == "extract")
    assert [r["extract"]["examples"] for r in evaluations["gold"]] == [N_GOLD_HELDOUT] * 2
    assert [r["extractor"].split("+")[0] for r in reports] == ["hf:smollm2"] * 4
    assert reports[1]["extractor"].startswith("hf:smollm2+adapter=")
    downstream = reports[1]["downstream"]
    assert downstream["extraction"]["chunks"] == 1 and downstream["pool"]["leaves"] == 1
    assert downstream["pool"]["aggregates"] == downstream["aggregates"]["aggregates"]
    assert downstream["aggregates"]["propositions"] == downstream["extraction"]["propositions"]
    print("\n" + (evaluations["out"] / "gold" / "eval.md").read_text())  # with pytest -s: the before/after table


def test_the_adapter_beats_the_base_model_on_held_out_sentences(evaluations):
    """The held-out metric the training is for: well-formed one-fact answers with the right
    fact and entities, on hand-annotated sentences the adapter never saw."""
    base, tuned = (r["extract"] for r in evaluations["gold"])
    summary = {k: (base[k], tuned[k]) for k in ("json_valid_rate",)}
    summary.update({f"{k} f1": (base[k]["f1"], tuned[k]["f1"]) for k in ("propositions", "entities")})
    assert tuned["json_valid_rate"] >= base["json_valid_rate"] + 0.25, summary
    assert tuned["propositions"]["f1"] >= base["propositions"]["f1"] + 0.25, summary
    assert tuned["entities"]["f1"] > base["entities"]["f1"], summary


def test_build_uses_the_adapter_for_extraction(trained, evaluations, llm_cache, tmp_path):
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
    # the evaluation ran the same extraction stage through the same cache
    downstream = evaluations["teacher"][1]["downstream"]
    assert report.counts["extraction"]["propositions"] == downstream["extraction"]["propositions"]


def test_loss_mask_covers_exactly_the_assistant_turns(trained):
    from finetune.modeling import IGNORE_INDEX, encode_chat

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
