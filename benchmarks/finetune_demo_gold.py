"""CPU fine-tuning demo against human annotations: does LoRA teach SmolLM2 the extraction task?

With SmolLM2 as both teacher and student, the held-out rows would be the base model's own
answers, so "before" and "after" would agree by construction. This demo (and, on a handful
of sentences, ``tests/test_finetune_loop.py``) uses a teacher that is better than the student:
the hand-annotated sentences of ``tests/data/tagger_gold.jsonl`` (benchmark sentences with
their entities, see docs/relatedness.md). Each sentence is a one-fact paragraph whose target is the Figure 7
JSON answer (the sentence as the fact, the annotated entities). The file's ``dev``
sentences train, its ``held-out`` sentences evaluate, and the base model and the adapter
are scored the same way (``finetune evaluate``).

    python -m benchmarks.finetune_demo_gold --out /tmp/ft_gold --steps 60
"""
from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.harness import Report, Timer, add_json_argument
from sirerag_finetune.config import load_train_config
from sirerag_finetune.data_format import extraction_example, write_dataset
from sirerag_finetune.evaluate import evaluate_extractor, write_report
from sirerag_finetune.train import train_lora
from sirerag.core.config import LLMConfig
from sirerag.extraction import Fact
from sirerag.core.io import read_jsonl

GOLD = Path(__file__).resolve().parents[1] / "tests" / "data" / "tagger_gold.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--max-tokens", type=int, default=160, help="completion budget of the evaluation")
    add_json_argument(ap)
    args = ap.parse_args()
    harness_report = Report("finetune_demo_gold")
    out = Path(args.out)
    rows = list(read_jsonl(GOLD))
    splits: dict[str, list] = {"train": [], "validation": []}
    for i, row in enumerate(rows):
        example = extraction_example(row["sentence"], [Fact(row["sentence"], tuple(row["entities"]))],
                                     doc_id=f"{row['passage_id']}-{i}", chunk_id=f"gold-{i}",
                                     max_tokens=args.max_tokens)
        splits["train" if row["split"] == "dev" else "validation"].append(example)
    data = out / "data"
    write_dataset(data, splits["train"], splits["validation"],
                  extra={"teacher": f"hand annotations ({GOLD.name})", "prompt_versions": {"extract": "extract_propositions@1"}})
    config = load_train_config("smollm2-135m-cpu").with_overrides([f"optim.max_steps={args.steps}",
                                                                     "optim.save_steps=0", "optim.eval_steps=0"])
    timings = {}
    with Timer() as timer:
        result = train_lora(config, data / "train.jsonl", out / "run", validation_path=data / "validation.jsonl")
    timings["train"] = timer.to_dict(ndigits=1)
    llm = LLMConfig(batch_size=8, device="cpu")
    reports = []
    for spec in ("hf:smollm2", result.summary["serve_spec"]):
        with Timer() as timer:
            reports.append(evaluate_extractor(spec, data / "validation.jsonl", llm_config=llm,
                                              cache_dir=out / "cache", max_tokens=args.max_tokens))
        timings[f"evaluate {spec.split('+')[0]}{' + adapter' if '+' in spec else ''}"] = timer.to_dict(ndigits=1)
    write_report(reports, out)
    print((out / "eval.md").read_text(encoding="utf-8"))
    print(f"train: {len(splits['train'])} rows, validation: {len(splits['validation'])} rows; "
          f"steps {args.steps}; loss {result.summary['first_loss']:.3f} -> {result.summary['final_loss']:.3f}; "
          f"validation loss {result.summary.get('eval_loss')}")
    print("seconds:", {k: v["wall_s"] for k, v in timings.items()})
    harness_report.results.update({"train_rows": len(splits["train"]), "validation_rows": len(splits["validation"]),
                                   "steps": args.steps, "summary": result.summary, "timings": timings})
    harness_report.write(args.json_out, show=False)


if __name__ == "__main__":
    main()
