"""The whole distillation loop on CPU with the real SmolLM2-135M-Instruct (shipped GGUF), kept small.

scripted teacher -> teacher data -> LoRA training of SmolLM2 -> resume from a checkpoint ->
adapter reloaded (by our loader and by the build's hf: backend) -> held-out loss of the base
model and the adapter -> evaluation before/after -> the adapter as the extraction LLM of a build.

The teacher is a scripted OpenAI-compatible server (tests/_llm_server.py) answering with
hand-written extractions (``HAND_WRITTEN``), one drifting rewrite and one answer without
JSON, so what make-data keeps and refuses is known exactly. (SmolLM2 as a teacher is
tested in test_extraction_llm.py; its answers vary with the machine.) The held-out metric
the training is for is the loss on hand-annotated benchmark sentences never trained on
(tests/data/tagger_gold.jsonl, ``heldout``): the adapter must beat the base model on it.
scripts/finetune_demo_gold.py measures the generation metrics on that data at a larger scale.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from finetune.config import load_train_config
from finetune.dataset import extraction_example, read_examples, write_dataset
from sirerag.config import BuildConfig, ChunkingConfig, ExtractionConfig, LLMConfig
from sirerag.extraction import Fact
from sirerag.extraction.parse import facts_to_json
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
# what a good teacher answers for each passage (written by hand for this test)
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
N_HELDOUT = 4  # the shortest held-out sentences (at least 5 words)
DRIFTS, NO_JSON = "Tove Jansson", "Lake Baikal"  # the teacher's rewrite / extraction failures
STEPS, SAVE = 12, 6  # three epochs or more: at most 4 training examples (2 documents x 2 tasks)


def teacher_reply(body: dict) -> str:
    """The scripted teacher: copies each paragraph as its rewrite (accepted) and answers the
    extraction with the hand-written facts, except for the two planned failures."""
    content = body["messages"][-1]["content"]
    if content.startswith("Previous paragraph"):
        paragraph = content.rsplit("Paragraph:\n", 1)[1].split("\n\nOutput:")[0]
        title = next(t for t, x in PASSAGES if x in paragraph)
        return "Margaret Lowe said the bridge was the project she liked best." if title == DRIFTS else paragraph
    paragraph = content.rsplit("Paragraph: ", 1)[1].rsplit("\nOutput:", 1)[0]
    title = next(t for t, x in PASSAGES if x in paragraph)
    if title == NO_JSON:
        return "I am sorry, I cannot list facts for this paragraph."
    return "```json\n" + facts_to_json([Fact(f, tuple(e)) for f, e in HAND_WRITTEN[title]]) + "\n```"


@pytest.fixture(scope="module")
def teacher_server():
    from _llm_server import FlakyServer

    with FlakyServer(reply=teacher_reply) as server:
        yield server


@pytest.fixture(scope="module")
def llm_cache(tmp_path_factory):
    """One call cache for the adapter's downstream evaluation and the build (same requests)."""
    return tmp_path_factory.mktemp("cache")


def make_data(server, out):  # noqa: ANN001, ANN201
    from finetune.data import make_teacher_data

    return make_teacher_data(DOCS, out, teacher=f"openai:teacher@{server.url}", llm_config=LLMConfig(max_retries=0),
                             validation_fraction=0.5, seed=0, show_progress=False, **BUDGETS)


@pytest.fixture(scope="module")
def teacher(teacher_server, tmp_path_factory):
    out = tmp_path_factory.mktemp("teacher")
    return out, make_data(teacher_server, out)


@pytest.fixture(scope="module")
def gold_heldout(tmp_path_factory):
    """Hand-annotated held-out sentences as one-fact answers, in a validation split."""
    rows = sorted((r for r in read_jsonl(GOLD) if r["split"] == "heldout" and len(r["sentence"].split()) >= 5),
                  key=lambda r: (len(r["sentence"]), r["sentence"]))[:N_HELDOUT]
    examples = [extraction_example(r["sentence"], [Fact(r["sentence"], tuple(r["entities"]))],
                                   doc_id=f"gold-{i}", chunk_id=f"gold-{i}", max_tokens=64) for i, r in enumerate(rows)]
    out = tmp_path_factory.mktemp("gold")
    write_dataset(out, [], examples, extra={"teacher": f"hand annotations ({GOLD.name}, heldout)"})
    return out / "validation.jsonl"


@pytest.fixture(scope="module")
def trained(teacher, gold_heldout, tmp_path_factory):
    from finetune.train import train_lora

    folder, _ = teacher
    config = load_train_config("smollm2-135m-cpu").with_overrides(
        [f"optim.max_steps={STEPS}", f"optim.save_steps={SAVE}", "optim.eval_steps=0"])
    out = tmp_path_factory.mktemp("run")
    result = train_lora(config, folder / "train.jsonl", out, validation_path=gold_heldout, show_progress=False)
    return config, result


@pytest.fixture(scope="module")
def evaluations(trained, gold_heldout, llm_cache, tmp_path_factory):
    """Generation-based reports on two held-out sentences: the base model, and the adapter
    (with downstream statistics over one passage)."""
    from finetune.evaluate import evaluate_extractor, write_report

    _, result = trained
    reports = [evaluate_extractor("hf:smollm2", gold_heldout, llm_config=LLM, max_examples=2, max_tokens=64,
                                  show_progress=False),
               evaluate_extractor(result.summary["serve_spec"], gold_heldout, llm_config=LLM, max_examples=2,
                                  max_tokens=64, cache_dir=llm_cache / "llm", corpus=DOCS[:1], extraction=EXTRACTION,
                                  show_progress=False)]
    out = tmp_path_factory.mktemp("eval")
    write_report(reports, out)
    return reports, out


def test_teacher_data_accounts_for_every_output(teacher, teacher_server):
    folder, card = teacher
    examples = read_examples(folder / "train.jsonl") + read_examples(folder / "validation.jsonl")
    rejected = list(read_jsonl(folder / "rejected.jsonl"))
    # every chunk gave exactly one rewrite and one extraction outcome: kept or refused with a reason
    titles = {d.id: d.title for d in DOCS}
    assert sorted((r["stage"], titles[r["doc_id"]]) for r in rejected) == [("extract", NO_JSON), ("rewrite", DRIFTS)]
    assert all(r["reason"] and r["raw"] for r in rejected)
    assert sorted((e.task, titles[e.doc_id]) for e in examples) == sorted(
        [("rewrite", t) for t, _ in PASSAGES if t != DRIFTS] + [("extract", t) for t, _ in PASSAGES if t != NO_JSON])
    # the refused rewrite falls back to the original paragraph, which is what the extraction was asked about
    extract = {titles[e.doc_id]: e for e in examples if e.task == "extract"}
    assert extract[DRIFTS].messages[0][1].endswith(f"Paragraph: {DRIFTS}\n{dict(PASSAGES)[DRIFTS]}\nOutput:\n")
    assert card["rejected"]["total"] == 2 and card["teacher"] == "openai:teacher"
    assert card["prompt_versions"] == {"rewrite": "coref_rewrite@1", "extract": "extract_propositions@1"}
    assert (folder / "data_card.md").read_text().count("×") == len(card["rejected"]["by_reason"])
    train_docs = {e.doc_id for e in read_examples(folder / "train.jsonl")}
    assert len(train_docs) == 2 and train_docs.isdisjoint(e.doc_id for e in read_examples(folder / "validation.jsonl"))
    # the call cache makes a second run free (the teacher is not asked again) and identical
    asked = len(teacher_server.bodies)
    assert asked == 2 * len(DOCS)
    assert make_data(teacher_server, folder) == card and len(teacher_server.bodies) == asked


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
    assert last < 0.7 * first, f"training loss did not decrease: {first:.3f} -> {last:.3f}"
    assert (result.adapter_dir / "adapter_model.safetensors").is_file()
    assert json.loads((result.adapter_dir / "adapter_config.json").read_text())["r"] == config.lora.r
    assert result.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = result.adapter_dir.parent
    assert not [p for p in out.rglob("*") if p.suffix in (".pt", ".pth", ".bin", ".pkl")]  # nothing pickled
    assert [p.name for p in sorted((out / "checkpoints").iterdir())] == [f"step-{SAVE:06d}", f"step-{STEPS:06d}"]
    summary = read_json(out / "training_summary.json")
    assert summary["serve_spec"] == f"hf:smollm2+adapter={result.adapter_dir.resolve()}"
    assert summary["n_validation"] == N_HELDOUT


def test_the_adapter_beats_the_base_model_on_held_out_sentences(trained, gold_heldout):
    """The held-out metric: token loss of the answers to hand-annotated sentences the adapter
    never saw, with the adapter and with it switched off (the base model)."""
    from finetune.modeling import encode_rows, read_chat_jsonl
    from finetune.train import _pad_id, evaluation_loss

    config, result = trained
    heldout, dropped = encode_rows(result.tokenizer, read_chat_jsonl(gold_heldout), config.optim.max_length)
    assert len(heldout) == N_HELDOUT and dropped == 0
    tuned = evaluation_loss(result.model, heldout, _pad_id(result.tokenizer), "cpu")
    with result.model.disable_adapter():
        base = evaluation_loss(result.model, heldout, _pad_id(result.tokenizer), "cpu")
    assert tuned == pytest.approx(result.eval_loss, abs=1e-4)  # what training reported
    assert tuned < 0.85 * base, (base, tuned)


def test_resume_reproduces_the_uninterrupted_run(teacher, trained, tmp_path):
    from finetune.train import train_lora

    config, result = trained
    folder, _ = teacher
    original = result.adapter_dir.parent
    name = f"step-{SAVE:06d}"
    shutil.copytree(original / "checkpoints" / name, tmp_path / "checkpoints" / name)
    rows = [json.loads(line) for line in (original / "train_log.jsonl").read_text().splitlines()]
    (tmp_path / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:SAVE]))
    resumed = train_lora(config, folder / "train.jsonl", tmp_path, resume="latest", show_progress=False)
    again = [json.loads(line) for line in resumed.log_path.read_text().splitlines()]
    assert [r["step"] for r in again] == list(range(1, STEPS + 1))
    assert [r["loss"] for r in again[SAVE:]] == pytest.approx([r["loss"] for r in rows[SAVE:]], abs=1e-5)


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


def test_adapter_reloads_with_identical_outputs(teacher, trained):
    import torch

    from finetune.modeling import load_adapter_model
    from sirerag.llm.base import LLMRequest
    from sirerag.llm.factory import load_llm

    config, result = trained
    messages = read_examples(teacher[0] / "validation.jsonl")[0].messages[:-1]
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


def test_evaluation_before_and_after(evaluations):
    reports, out = evaluations
    for report in reports:
        extract = report["extract"]
        assert extract["examples"] == 2 and 0.0 <= extract["json_valid_rate"] <= 1.0
        for key in ("precision", "recall", "f1"):
            assert 0.0 <= extract["entities"][key] <= 1.0 and 0.0 <= extract["propositions"][key] <= 1.0
    assert reports[0]["extractor"] == "hf:smollm2" and reports[1]["extractor"].startswith("hf:smollm2+adapter=")
    downstream = reports[1]["downstream"]
    assert downstream["extraction"]["chunks"] == 1 and downstream["pool"]["leaves"] == 1
    assert downstream["pool"]["aggregates"] == downstream["aggregates"]["aggregates"]
    assert downstream["aggregates"]["propositions"] == downstream["extraction"]["propositions"]
    assert "| JSON valid rate |" in (out / "eval.md").read_text()


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
    downstream = evaluations[0][1]["downstream"]
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
