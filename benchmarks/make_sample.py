"""Make the data/ sample: MuSiQue dev questions with their gold passages plus distractors.

Run from the repository root (it reads ../shared/bench/musique):

    python -m benchmarks.make_sample --bench ../shared/bench/musique --questions 40 --passages 300
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="../shared/bench/musique")
    ap.add_argument("--out", default="data")
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--passages", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    bench = Path(args.bench)
    corpus = [json.loads(line) for line in open(bench / "corpus.jsonl", encoding="utf-8")]
    questions = [json.loads(line) for line in open(bench / "questions.jsonl", encoding="utf-8")]
    by_id = {row["id"]: row for row in corpus}
    rng = random.Random(args.seed)
    dev = [q for q in questions if q.get("split") == "dev" and all(p in by_id for p in q["gold_passage_ids"])]
    chosen = sorted(rng.sample(dev, min(args.questions, len(dev))), key=lambda q: q["id"])
    keep = {p for q in chosen for p in q["gold_passage_ids"]}
    others = [row["id"] for row in corpus if row["id"] not in keep]
    keep.update(rng.sample(others, max(0, args.passages - len(keep))))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for row in corpus:  # corpus order is kept
            if row["id"] in keep:
                fh.write(json.dumps({"id": row["id"], "title": row["title"], "text": row["text"]},
                                    ensure_ascii=False) + "\n")
    with open(out / "questions.jsonl", "w", encoding="utf-8") as fh:
        for q in chosen:
            fh.write(json.dumps(q, ensure_ascii=False) + "\n")
    print(f"wrote {len(keep)} passages and {len(chosen)} questions to {out}")


if __name__ == "__main__":
    main()
