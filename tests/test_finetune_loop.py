"""The whole distillation loop on CPU with the real SmolLM2-135M-Instruct (shipped GGUF), kept small.

scripted teacher -> ``make_teacher_data`` -> LoRA training of SmolLM2 -> the adapter beats the base
model on held-out sentences -> resume from a checkpoint -> the adapter reloaded (by our loader and
by the build's ``hf:`` backend) -> the adapter as the extraction LLM of a real build.

The teacher is better than the student and costs nothing: a scripted OpenAI-compatible server
(tests/_llm_server.py) answering each extraction prompt with the hand annotation of its sentence
from tests/data/tagger_gold.jsonl (the sentence as the one fact, the annotated entities), and
refusing one sentence on purpose. The ``dev`` sentences train; the held-out metric is generation
on the file's ``heldout`` sentences, which no training example contains, scored with the build's
parser by ``finetune evaluate``. benchmarks/finetune_demo_gold.py measures the same on all 74 sentences.
SmolLM2 ships as a GGUF file, which transformers dequantises on every load (about 20 s here); the
module dequantises it once into a float32 folder (``base``), and every load here reads that folder,
which is the same model. Every fixture is module-scoped; no test reads what another test left behind.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from sirerag.core.config import BuildConfig, ChunkingConfig, ExtractionConfig, LLMConfig
from sirerag.extraction import Fact
from sirerag.core.io import read_json, read_jsonl
from sirerag.core.types import Document, document_id

from sirerag_finetune.config import load_train_config
from sirerag_finetune.data_format import extraction_example, facts_target, read_examples, write_dataset

pytestmark = pytest.mark.slow

GOLD = Path(__file__).parent / "data" / "tagger_gold.jsonl"
N_TRAIN, N_HELDOUT = 5, 6  # the shortest annotated sentences of each split (with at least 7 / 5 words)
MAX_TOKENS = 64  # completion budget: room for a one-fact answer to these short sentences
STEPS, LEARNING_RATE = 8, 3e-3  # two epochs over the 4 training examples
REFUSED = 0  # the teacher refuses the shortest training sentence: one rejection, N_TRAIN - 1 examples kept
BUDGETS = {"rewrite_max_tokens": 48, "extract_max_tokens": MAX_TOKENS, "max_attempts": 1}
LLM = LLMConfig(batch_size=N_HELDOUT, device="cpu")


def gold_rows(split: str, n: int, min_words: int) -> list[dict]:
    rows = [r for r in read_jsonl(GOLD) if r["split"] == split and len(r["sentence"].split()) >= min_words]
    return sorted(rows, key=lambda r: (len(r["sentence"]), r["sentence"]))[:n]


def as_document(row: dict) -> Document:
    return Document(id=document_id("", row["sentence"]), title="", text=row["sentence"])


def gold_answer(row: dict) -> str:
    return facts_target([Fact(row["sentence"], tuple(row["entities"]))])


@pytest.fixture(scope="module")
def gold() -> dict[str, list[dict]]:
    return {"train": gold_rows("dev", N_TRAIN, 7), "heldout": gold_rows("heldout", N_HELDOUT, 5)}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    """SmolLM2-135M-Instruct dequantised once from the shipped GGUF into a model folder; the base
    ``hf:`` backend stays loaded for the whole module (adapters are merged into copies of it)."""
    from sirerag.llm.factory import load_llm

    from sirerag_finetune.modeling import load_base_model

    folder = tmp_path_factory.mktemp("smollm2").resolve()
    model, tokenizer = load_base_model(load_train_config("smollm2-135m-cpu").model)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    del model
    llm = load_llm(f"hf:{folder}", config=LLM)  # noqa: F841 - kept alive until the module ends
    yield str(folder)


@pytest.fixture(scope="module")
def teacher_server(gold):
    from _llm_server import FlakyServer

    answers = {r["sentence"]: gold_answer(r) for r in gold["train"]}
    refused = gold["train"][REFUSED]["sentence"]

    def reply(body: dict) -> str:
        paragraph = body["messages"][-1]["content"].rsplit("Paragraph: ", 1)[1].rsplit("\nOutput:", 1)[0].strip()
        return "I am sorry, I cannot list facts for this paragraph." if paragraph == refused else answers[paragraph]

    with FlakyServer(reply=reply) as server:
        yield server


def make_data(server, gold, out):  # noqa: ANN001, ANN201
    from sirerag_finetune.make_data import make_teacher_data

    return make_teacher_data([as_document(r) for r in gold["train"]], out, teacher=f"openai:teacher@{server.url}",
                             llm_config=LLMConfig(max_retries=0), tasks=("extract",), validation_fraction=0.0,
                             seed=0, show_progress=False, **BUDGETS)


@pytest.fixture(scope="module")
def teacher(teacher_server, gold, tmp_path_factory):
    out = tmp_path_factory.mktemp("teacher")
    return out, make_data(teacher_server, gold, out)


@pytest.fixture(scope="module")
def heldout(gold, tmp_path_factory) -> Path:
    """The held-out sentences as one-fact extraction examples (a validation split)."""
    examples = [extraction_example(r["sentence"], [Fact(r["sentence"], tuple(r["entities"]))],
                                   doc_id=as_document(r).id, chunk_id=f"heldout-{i}", max_tokens=MAX_TOKENS)
                for i, r in enumerate(gold["heldout"])]
    out = tmp_path_factory.mktemp("heldout")
    write_dataset(out, [], examples, extra={"teacher": f"hand annotations ({GOLD.name}, heldout)"})
    return out / "validation.jsonl"


@pytest.fixture(scope="module")
def trained(base, teacher, heldout, tmp_path_factory):
    from sirerag_finetune.train import train_lora

    folder, _ = teacher
    config = load_train_config("smollm2-135m-cpu")
    config = replace(config, model=replace(config.model, base=base)).with_overrides(
        [f"optim.max_steps={STEPS}", f"optim.save_steps={STEPS - 1}", "optim.eval_steps=0",
         f"optim.learning_rate={LEARNING_RATE}"])
    out = tmp_path_factory.mktemp("run")
    result = train_lora(config, folder / "train.jsonl", out, validation_path=heldout, show_progress=False)
    return config, result


@pytest.fixture(scope="module")
def evaluations(base, trained, heldout, gold, tmp_path_factory):
    """``finetune evaluate`` on the held-out sentences: the base model, then the adapter (with the
    downstream statistics of one held-out sentence run through the build's extraction stage)."""
    from sirerag_finetune.evaluate import evaluate_extractor, write_report

    _, result = trained
    out = tmp_path_factory.mktemp("eval")
    extraction = ExtractionConfig(extractor="llm", **BUDGETS)
    reports = [evaluate_extractor(f"hf:{base}", heldout, llm_config=LLM, show_progress=False),
               evaluate_extractor(result.summary["serve_spec"], heldout, llm_config=LLM,
                                  cache_dir=out / "cache" / "llm", corpus=[as_document(gold["heldout"][-1])],
                                  extraction=extraction, show_progress=False)]
    write_report(reports, out)
    return reports, out


def test_teacher_data_accounts_for_every_output(teacher, teacher_server, gold):
    folder, card = teacher
    train = read_examples(folder / "train.jsonl")
    rejected = list(read_jsonl(folder / "rejected.jsonl"))
    # one extraction per sentence: kept with the teacher's answer, or refused with a reason
    refused = as_document(gold["train"][REFUSED]).id
    assert [(r["stage"], r["doc_id"]) for r in rejected] == [("extract", refused)]
    assert rejected[0]["reason"] and rejected[0]["raw"] == ["I am sorry, I cannot list facts for this paragraph."]
    expected = {as_document(r).id: gold_answer(r) for i, r in enumerate(gold["train"]) if i != REFUSED}
    assert {e.doc_id: e.messages[-1][1] for e in train} == expected
    assert all(e.task == "extract" and e.max_tokens == MAX_TOKENS for e in train)
    assert not read_examples(folder / "validation.jsonl")  # the held-out set is separate (fixture heldout)
    assert card["rejected"]["total"] == 1 and card["teacher"] == "openai:teacher"
    assert card["examples"]["train"]["total"] == N_TRAIN - 1
    assert (folder / "data_card.md").read_text().count("×") == len(card["rejected"]["by_reason"])
    # the call cache makes a second run free (the teacher is not asked again) and identical
    asked = len(teacher_server.bodies)
    assert asked == N_TRAIN
    assert make_data(teacher_server, gold, folder) == card and len(teacher_server.bodies) == asked


def test_training_loss_decreases_and_writes_artifacts(trained, gold):
    config, result = trained
    log = [json.loads(line) for line in result.log_path.read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, STEPS + 1))
    # one row per step, so an epoch is n_train consecutive steps over the same examples:
    # compare the token-weighted loss of the first and the last full epoch
    n = result.summary["n_train"]
    assert n == N_TRAIN - 1 and STEPS >= 2 * n

    def epoch_loss(rows):
        return sum(r["loss"] * r["tokens"] for r in rows) / sum(r["tokens"] for r in rows)

    first, last = epoch_loss(log[:n]), epoch_loss(log[(STEPS // n - 1) * n:(STEPS // n) * n])
    assert last < 0.6 * first, f"training loss did not decrease: {first:.3f} -> {last:.3f}"
    assert (result.adapter_dir / "adapter_model.safetensors").is_file()
    assert json.loads((result.adapter_dir / "adapter_config.json").read_text())["r"] == config.lora.r
    assert result.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = result.adapter_dir.parent
    assert not [p for p in out.rglob("*") if p.suffix in (".pt", ".pth", ".bin", ".pkl")]  # nothing pickled
    assert [p.name for p in sorted((out / "checkpoints").iterdir())] == [f"step-{STEPS - 1:06d}",
                                                                          f"step-{STEPS:06d}"]
    summary = read_json(out / "training_summary.json")
    assert summary["serve_spec"] == f"hf:{config.model.base}+adapter={result.adapter_dir.resolve()}"
    assert summary["n_validation"] == N_HELDOUT  # the held-out loss at the end of training
    assert summary["eval_loss"] == result.eval_loss == log[-1]["eval_loss"] and 0 < result.eval_loss < first
    held = {r["sentence"] for r in gold["heldout"]}
    assert len(held) == N_HELDOUT and held.isdisjoint(r["sentence"] for r in gold["train"])


#: the adapter's held-out figures, floors a few points under what was measured with the constants above
#: (torch 2.13 CPU; docs/finetune.md section 5): valid JSON 0.667 (base 0.167), proposition F1 0.800 (base
#: 0.286), entity F1 0.588 (base 0.154). Six sentences: one answer more or less moves the rate by 0.167.
FLOORS = {"json_valid_rate": 0.63, "propositions": 0.75, "entities": 0.55}


def test_the_adapter_beats_the_base_model_on_held_out_sentences(base, evaluations):
    """Generation on sentences no training example contains, parsed as a build parses it."""
    reports, out = evaluations
    before, after = reports[0]["extract"], reports[1]["extract"]
    assert reports[0]["extractor"] == f"hf:{base}" and reports[1]["extractor"].startswith(f"hf:{base}+adapter=")
    assert before["examples"] == after["examples"] == N_HELDOUT
    got = {name: (after["json_valid_rate"], before["json_valid_rate"]) if name == "json_valid_rate"
           else (after[name]["f1"], before[name]["f1"]) for name in FLOORS}
    print("held-out (adapter, base):", got)  # shown with pytest -s
    for name, floor in FLOORS.items():
        assert got[name][0] >= floor and got[name][0] > got[name][1], (name, got)
    assert "| JSON valid rate |" in (out / "eval.md").read_text()


def test_resume_reproduces_the_uninterrupted_run(teacher, trained, tmp_path):
    """Resuming from the last checkpoint but one redoes the final step: the same loss, and the same
    adapter weights, which needs the restored optimiser moments, schedule and data order."""
    from safetensors.torch import load_file

    from sirerag_finetune.train import train_lora

    config, result = trained
    folder, _ = teacher
    original = result.adapter_dir.parent
    name = f"step-{STEPS - 1:06d}"
    shutil.copytree(original / "checkpoints" / name, tmp_path / "checkpoints" / name)
    rows = [json.loads(line) for line in (original / "train_log.jsonl").read_text().splitlines()]
    (tmp_path / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:STEPS - 1]))
    resumed = train_lora(config, folder / "train.jsonl", tmp_path, resume="latest", show_progress=False)
    again = [json.loads(line) for line in resumed.log_path.read_text().splitlines()]
    assert [r["step"] for r in again] == list(range(1, STEPS + 1)) and resumed.summary["resumed_from_step"] == STEPS - 1
    assert again[-1]["loss"] == pytest.approx(rows[-1]["loss"], abs=1e-5)
    weights = load_file(str(resumed.adapter_dir / "adapter_model.safetensors"))
    expected = load_file(str(result.adapter_dir / "adapter_model.safetensors"))
    assert weights.keys() == expected.keys()
    start = load_file(str(original / "checkpoints" / name / "adapter_model.safetensors"))
    for key, value in expected.items():
        assert (value - weights[key]).abs().max() <= 1e-5 * (1 + value.abs().max()), key
    assert any(not (value == start[key]).all() for key, value in expected.items())  # the last step changed them


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


def test_adapter_reloads_with_identical_outputs(heldout, trained):
    import torch

    from sirerag.llm.base import LLMRequest
    from sirerag.llm.factory import load_llm

    from sirerag_finetune.modeling import load_adapter_model

    config, result = trained
    messages = read_examples(heldout)[0].messages[:-1]
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


def test_build_uses_the_adapter_for_extraction(base, trained, evaluations, gold, tmp_path):
    from sirerag.pipeline.build import build_index

    _, result = trained
    reports, out = evaluations
    downstream = reports[1]["downstream"]
    assert downstream["extraction"]["chunks"] == 1 and downstream["pool"]["leaves"] == 1
    assert downstream["pool"]["aggregates"] == downstream["aggregates"]["aggregates"]
    assert downstream["aggregates"]["propositions"] == downstream["extraction"]["propositions"]
    config = BuildConfig(trees=("relatedness",), chunking=ChunkingConfig(mode="passage"),
                         extraction=ExtractionConfig(extractor="llm", llm=result.summary["serve_spec"], **BUDGETS))
    # the evaluation's call cache: the build sends the requests the evaluation's downstream run sent
    report = build_index([as_document(gold["heldout"][-1])], tmp_path / "index", config, cache_dir=out / "cache",
                         show_progress=False)
    manifest = read_json(tmp_path / "index" / "manifest.json")
    assert manifest["extractor"].startswith(f"llm:hf:{base}+adapter={result.adapter_dir.resolve()}#")
    assert report.counts["extraction"]["chunks"] == 1
    rewrites = list(read_jsonl(tmp_path / "index" / "rewrites.jsonl"))
    assert len(rewrites) == 1 and rewrites[0]["rewrite"]  # the adapter answered the rewrite stage too
    assert report.counts["extraction"]["propositions"] == downstream["extraction"]["propositions"]


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
