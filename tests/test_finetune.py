"""Fast tests of the fine-tuning tools: metrics, configs, teacher-data files, scoring, CLI.

The end-to-end loop with a real model is in ``test_finetune_loop.py``.
"""
from __future__ import annotations

import json

import pytest

from sirerag_finetune.config import LoRAConfig, OptimConfig, TrainConfig, bundled_configs, load_train_config
from sirerag_finetune.data_format import (
    Example,
    card_markdown,
    extraction_example,
    facts_target,
    read_examples,
    rewrite_example,
    split_by_document,
    write_dataset,
)
from sirerag_finetune.evaluate import report_markdown, score_extraction, score_rewrites
from sirerag_finetune.metrics import PRF, match_propositions, rouge_l, set_prf, token_f1
from sirerag.core.errors import ConfigError, InputError
from sirerag.extraction import Fact, parse_facts

# ---------------------------------------------------------------- metrics


def test_token_f1_hand_computed():
    # pred {the, cat, sat}, ref {the, cat, ran, away}: 2 common; P=2/3, R=2/4 -> F1 = 4/7
    assert token_f1("The cat sat.", "the cat ran away") == pytest.approx(4 / 7)
    assert token_f1("", "") == 1.0
    assert token_f1("a", "") == 0.0
    assert token_f1("x y", "z") == 0.0


def test_rouge_l_uses_order_unlike_token_f1():
    # same bag of words, reversed order: token F1 is perfect, ROUGE-L is not
    a, b = "alpha beta gamma delta", "delta gamma beta alpha"
    assert token_f1(a, b) == 1.0
    assert rouge_l(a, b) == pytest.approx(0.25)  # LCS = 1 of 4 tokens
    # LCS of "a b c d e" and "a x c y e" is a c e -> P = R = 3/5
    assert rouge_l("a b c d e", "a x c y e") == pytest.approx(0.6)


def test_matching_is_one_to_one_and_optimal():
    reference = ["Paris is the capital of France", "Berlin is the capital of Germany"]
    # the first prediction is similar to both references; greedy by first prediction would
    # take the best pair for it and could strand the second; the assignment must cover both
    predicted = ["the capital of France and Germany", "Berlin is the capital of Germany"]
    m = match_propositions(predicted, reference, threshold=0.3)
    assert sorted((i, j) for i, j, _ in m.pairs) == [(0, 0), (1, 1)]
    assert m.counts == PRF(2, 2, 2)
    # a duplicate prediction can match only once
    dup = match_propositions([reference[0], reference[0]], reference, threshold=0.9)
    assert dup.counts == PRF(1, 2, 2)
    assert dup.counts.precision == 0.5 and dup.counts.recall == 0.5


def test_matching_threshold_and_errors():
    m = match_propositions(["completely unrelated words"], ["Paris is in France"], threshold=0.5)
    assert m.pairs == () and m.counts.f1 == 0.0
    assert match_propositions([], ["x"]).counts == PRF(0, 0, 1)
    with pytest.raises(ValueError, match="similarity must be one of"):
        match_propositions(["a"], ["a"], similarity="bleu")
    with pytest.raises(ValueError, match="threshold must be in"):
        match_propositions(["a"], ["a"], threshold=0.0)


def test_prf_micro_sums_and_edge_cases():
    total = set_prf({"a", "b"}, {"a"}) + set_prf({"c"}, {"c", "d"})
    assert total == PRF(2, 3, 3)
    assert total.precision == pytest.approx(2 / 3) and total.f1 == pytest.approx(2 / 3)
    assert PRF(0, 0, 0).precision == 1.0 and PRF(0, 0, 0).recall == 1.0
    assert PRF(0, 0, 3).precision == 0.0 and PRF(0, 0, 3).f1 == 0.0


# ---------------------------------------------------------------- configs


def test_bundled_configs_load_and_follow_the_recipes():
    assert bundled_configs() == ["mistral-7b-instruct-v0.3", "smollm2-135m-cpu"]
    mistral = load_train_config("mistral-7b-instruct-v0.3").validate()
    assert (mistral.lora.r, mistral.lora.alpha, mistral.lora.dropout) == (16, 32, 0.05)
    assert set(mistral.lora.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                "down_proj"}
    assert mistral.optim.learning_rate == 2e-4 and mistral.optim.lr_scheduler == "cosine"
    cpu = load_train_config("smollm2-135m-cpu").validate()
    assert cpu.model.base == "smollm2" and cpu.model.dtype == "float32"


def test_config_errors_name_parameter_and_value(tmp_path):
    with pytest.raises(ConfigError, match=r"lora\.r must be an integer >= 1, got 0"):
        TrainConfig(lora=LoRAConfig(r=0)).validate()
    with pytest.raises(ConfigError, match=r"optim\.lr_scheduler must be one of"):
        TrainConfig(optim=OptimConfig(lr_scheduler="wsd")).validate()
    bad = tmp_path / "bad.toml"
    bad.write_text("[lora]\nrank = 8\n")
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) \['rank'\]"):
        load_train_config(bad)
    with pytest.raises(ConfigError, match="training config not found"):
        load_train_config("no-such-config")
    with pytest.raises(ConfigError, match="SECTION.KEY=VALUE"):
        TrainConfig().with_overrides(["max_steps=3"])


def test_overrides_parse_toml_values():
    config = load_train_config("smollm2-135m-cpu").with_overrides(
        ["optim.max_steps=7", "lora.target_modules=['q_proj', 'v_proj']", "model.base=/models/x", "lora.dropout=0.1"])
    assert config.optim.max_steps == 7
    assert config.lora.target_modules == ("q_proj", "v_proj")
    assert config.model.base == "/models/x" and config.lora.dropout == 0.1
    assert TrainConfig.from_dict(config.to_dict()) == config


# ---------------------------------------------------------------- teacher data files


FACTS = (Fact("Ada Lovelace was an English mathematician.", ("Ada Lovelace",)),
         Fact("Ada Lovelace wrote an algorithm for the Analytical Engine in 1843.",
              ("Ada Lovelace", "Analytical Engine", "1843")))


def _examples(n_docs: int) -> list[Example]:
    out = []
    for d in range(n_docs):
        out.append(extraction_example(f"paragraph {d}", FACTS, doc_id=f"d{d}", chunk_id=f"c{d}", max_tokens=64))
        out.append(rewrite_example("prev", f"paragraph {d}", f"rewritten {d}", doc_id=f"d{d}", chunk_id=f"c{d}",
                                   max_tokens=48))
    return out


def test_facts_target_round_trips_through_the_build_parser():
    text = facts_target(FACTS)
    assert text.startswith("```json\n{") and text.endswith("}\n```")
    assert parse_facts(text).facts == FACTS


def test_split_is_by_document_seeded_and_never_empty():
    examples = _examples(10)
    train, validation = split_by_document(examples, 0.2, seed=3)
    assert {e.doc_id for e in train}.isdisjoint({e.doc_id for e in validation})
    assert len({e.doc_id for e in validation}) == 2 and len(train) + len(validation) == len(examples)
    assert split_by_document(examples, 0.2, seed=3) == (train, validation)
    assert split_by_document(examples, 0.2, seed=4) != (train, validation)
    # a small fraction of few documents still holds one out; one document stays in train
    assert len({e.doc_id for e in split_by_document(_examples(3), 0.01, seed=0)[1]}) == 1
    assert split_by_document(_examples(1), 0.5, seed=0)[1] == []


def test_dataset_files_round_trip(tmp_path):
    train, validation = split_by_document(_examples(4), 0.25, seed=1)
    card = write_dataset(tmp_path, train, validation, extra={"teacher": "hf:test", "rejected": {"total": 0}})
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert all(set(r) == {"messages"} for r in rows)  # plain chat rows, readable by any chat trainer
    assert rows[0]["messages"][-1]["role"] == "assistant"
    assert read_examples(tmp_path / "train.jsonl") == train
    assert read_examples(tmp_path / "validation.jsonl") == validation
    assert card["examples"]["train"]["total"] == len(train)
    assert "hf:test" in (tmp_path / "data_card.md").read_text()
    (tmp_path / "validation.meta.jsonl").unlink()
    with pytest.raises(InputError, match="validation.meta.jsonl is missing"):
        read_examples(tmp_path / "validation.jsonl")


def test_data_card_markdown_lists_rejections():
    card = {"teacher": "t", "examples": {"train": {"total": 3, "by_task": {"extract": 3}, "documents": 2}},
            "rejected": {"total": 2, "by_reason": {"extract: no JSON object or array in the output": 2}}}
    md = card_markdown(card)
    assert "2 × extract: no JSON object or array in the output" in md and "| train | 3 | 0 | 3 | 2 |" in md


# ---------------------------------------------------------------- scoring


def test_score_extraction_perfect_partial_and_invalid():
    example = extraction_example("Ada Lovelace was an English mathematician. She wrote an algorithm for the "
                                 "Analytical Engine in 1843.", FACTS, doc_id="d", chunk_id="c", max_tokens=64)
    perfect = score_extraction([facts_target(FACTS)], [example])
    assert perfect["json_valid_rate"] == 1.0
    assert perfect["entities"]["f1"] == 1.0 and perfect["propositions"]["f1"] == 1.0
    half = facts_target((Fact("Ada Lovelace was an English mathematician.", ("ada lovelace.",)),))
    partial = score_extraction([half], [example])
    assert partial["entities"]["precision"] == 1.0  # "ada lovelace." normalises to the same key
    assert partial["entities"]["recall"] == pytest.approx(1 / 3, abs=1e-4)
    assert partial["propositions"]["precision"] == 1.0 and partial["propositions"]["recall"] == 0.5
    invalid = score_extraction(["I cannot help with that."], [example])
    assert invalid["json_valid_rate"] == 0.0 and invalid["propositions"]["recall"] == 0.0
    assert invalid["invalid_reasons"] == {"no JSON object or array in the output": 1}


def test_score_rewrites_uses_the_drift_guard():
    example = rewrite_example("Ada Lovelace was a mathematician.", "She wrote the first algorithm.",
                              "Ada Lovelace wrote the first algorithm.", doc_id="d", chunk_id="c", max_tokens=48)
    good = score_rewrites(["Ada Lovelace wrote the first algorithm."], [example])
    assert good == {"examples": 1, "accepted_rate": 1.0, "rouge_l": 1.0, "token_f1": 1.0}
    drifted = score_rewrites(["The Eiffel Tower is in Paris and was built for a world fair."], [example])
    assert drifted["accepted_rate"] == 0.0 and drifted["rouge_l"] < 0.3


def test_report_markdown_has_one_column_per_extractor():
    md = report_markdown([{"extractor": "hf:a", "extract": {"json_valid_rate": 0.5}},
                          {"extractor": "hf:b", "extract": {"json_valid_rate": 1.0}}])
    assert "| metric | `hf:a` | `hf:b` |" in md and "| JSON valid rate | 0.5 | 1.0 |" in md


# ---------------------------------------------------------------- CLI


def test_cli_registers_the_three_steps(capsys):
    from sirerag_finetune.cli import main

    with pytest.raises(SystemExit, match="^0$"):  # argparse exits 0 after printing the help
        main(["--help"])
    out = capsys.readouterr().out
    assert "make-data" in out and "train" in out and "evaluate" in out


def test_cli_train_needs_exactly_one_data_source(tmp_path, capsys):
    from sirerag_finetune.cli import main

    assert main(["train", "--config", "smollm2-135m-cpu", "--out", str(tmp_path)]) == 1
    assert "give either --data DIR" in capsys.readouterr().err
    assert main(["train", "--config", "nope", "--train", "x.jsonl", "--out", str(tmp_path)]) == 1
    assert "training config not found" in capsys.readouterr().err


# ---------------------------------------------------------------- teacher pipeline (scripted teacher)


class ScriptedTeacher:
    """Stands in for the teacher LLM: answers each prompt with the first scripted text whose key
    occurs in it (the pipeline under test is the data code, not the model)."""

    spec = "scripted:teacher"

    def __init__(self, script):
        self.script, self.requests = script, []

    def complete(self, request):
        return self.complete_many([request])[0]

    def complete_many(self, requests, *, return_exceptions=False):
        from sirerag.llm.base import Completion

        out = []
        for request in requests:
            self.requests.append(request)
            prompt = request.messages[-1][1]
            paragraph = prompt.rsplit("Paragraph:", 1)[1]
            text = next(answer for key, answer in self.script[request.prompt_version] if key in paragraph)
            out.append(Completion(text=text, prompt_tokens=10, completion_tokens=10, finish_reason="stop"))
        return out


def test_teacher_examples_keep_only_outputs_that_pass_the_build_checks():
    from sirerag.core.config import ChunkingConfig
    from sirerag.core.types import Document

    from sirerag_finetune.make_data import teacher_examples

    docs = [Document(id="d1", title="Ada", text="Ada Lovelace was a mathematician. She wrote an algorithm."),
            Document(id="d2", title="Bridge", text="The Harwick Bridge opened in 1931. It crosses the Tame."),
            Document(id="d3", title="Baikal", text="Lake Baikal is in Siberia. It is very deep.")]
    teacher = ScriptedTeacher({
        "coref_rewrite@1": [
            ("Ada Lovelace", "Ada Lovelace was a mathematician. Ada Lovelace wrote an algorithm."),
            ("Harwick", "Output: The Eiffel Tower is a landmark in Paris, built for a world fair."),  # drift
            ("Baikal", "Lake Baikal is in Siberia. Lake Baikal is very deep.")],
        "extract_propositions@1": [
            ("Ada Lovelace wrote", '```json\n{"f1": {"fact": "Ada Lovelace wrote an algorithm.", '
                                   '"entities": ["Ada Lovelace"]}}\n```'),
            ("Harwick", 'Sure! {"f1": {"fact": "The Harwick Bridge opened in 1931", "entities": ["Harwick Bridge",'
                        ' "1931", "Paris"]}, "f2": {"fact": "Peter Mbeki is an ecologist.", "entities": []}}'),
            ("Baikal", "I am sorry, I cannot do that.")],
    })
    examples, rejected, counts = teacher_examples(docs, teacher, chunking=ChunkingConfig(mode="passage"),
                                                  max_attempts=1, show_progress=False)
    by = {(e.task, e.doc_id): e for e in examples}
    assert sorted(by) == [("extract", "d1"), ("extract", "d2"), ("rewrite", "d1"), ("rewrite", "d3")]
    assert sorted((r["stage"], r["doc_id"]) for r in rejected) == [("extract", "d3"), ("rewrite", "d2")]
    assert "of the original words" in next(r["reason"] for r in rejected if r["stage"] == "rewrite")
    assert next(r["raw"] for r in rejected if r["stage"] == "extract") == ["I am sorry, I cannot do that."]
    # extraction reads the accepted rewrite, or the original text when the rewrite was refused
    assert by["extract", "d1"].inputs["paragraph"] == "Ada Lovelace was a mathematician. Ada Lovelace wrote an algorithm."
    assert by["extract", "d2"].inputs["paragraph"] == docs[1].content
    # the target is the cleaned facts, canonically serialised: the echoed example fact and the
    # entity not in the text ("Paris") are gone, the prose around the JSON too
    assert by["extract", "d2"].messages[-1][1] == ('```json\n{\n  "f1": {"fact": "The Harwick Bridge opened in 1931", '
                                                  '"entities": ["Harwick Bridge", "1931"]}\n}\n```')
    assert counts["facts_dropped_by_cleaning"] == 1 and counts["entities_dropped_ungrounded"] == 1
    assert by["rewrite", "d1"].messages[-1] == ("assistant", teacher.script["coref_rewrite@1"][0][1])
    assert all(e.messages[-2][0] == "user" and e.prompt in ("coref_rewrite@1", "extract_propositions@1")
               for e in examples)


def test_make_teacher_data_refuses_when_nothing_is_valid(tmp_path, monkeypatch):
    import sirerag.llm.factory as factory
    from sirerag.core.types import Document

    from sirerag_finetune.make_data import make_teacher_data

    garbage = ScriptedTeacher({"coref_rewrite@1": [("", "")], "extract_propositions@1": [("", "no")]})
    monkeypatch.setattr(factory, "load_llm", lambda spec, **kw: garbage)
    docs = [Document(id="d1", title="", text="Ada Lovelace was a mathematician.")]
    with pytest.raises(ConfigError, match="produced no valid example"):
        make_teacher_data(docs, tmp_path, teacher="scripted:x", max_attempts=1, show_progress=False)
    assert len((tmp_path / "rejected.jsonl").read_text().splitlines()) == 2


# ---------------------------------------------------------------- checkpoints


def test_training_refuses_to_mix_runs_and_finds_checkpoints(tmp_path):
    from sirerag_finetune.checkpoint import find_checkpoint, list_checkpoints
    from sirerag_finetune.train import train_lora

    for name in ("step-000010", "step-000020", "step-000030.tmp"):  # a .tmp is a crashed write
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
        (tmp_path / "checkpoints" / name / "state.json").write_text("{}")
    (tmp_path / "checkpoints" / "step-000040").mkdir()  # no state.json: incomplete
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-000010", "step-000020"]
    assert find_checkpoint(tmp_path, "latest").name == "step-000020"
    with pytest.raises(ConfigError, match="resume must be 'latest' or a checkpoint folder"):
        find_checkpoint(tmp_path, tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="found none"):
        find_checkpoint(tmp_path / "empty", "latest")
    with pytest.raises(ConfigError, match="already holds checkpoints"):  # raised before any model is loaded
        train_lora(load_train_config("smollm2-135m-cpu"), tmp_path / "train.jsonl", tmp_path)
