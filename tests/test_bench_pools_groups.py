"""bench_pools --grid --by: questions grouped by a field of their rows, and the groups' results merged into the
results of all of them (means weighted by the questions each counts)."""
from __future__ import annotations

import json

import pytest

from benchmarks.bench_pools import grouped, merged
from sirerag.evaluation.retrieval import load_questions


def test_questions_are_grouped_by_a_field_and_the_groups_merge_by_their_question_counts(tmp_path):
    path = tmp_path / "questions.jsonl"
    rows = [{"id": f"q{i}", "question": f"question {i}?", "answers": ["a"], "gold_passage_ids": ["p"],
             "hops": hops} for i, hops in enumerate([2, 3, 2, 4])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions = load_questions(path)
    groups = grouped(questions, str(path), "hops")
    assert {k: [q.id for q in v] for k, v in groups.items()} == {2: ["q0", "q2"], 3: ["q1"], 4: ["q3"]}
    assert list(grouped(questions, str(path), None)) == ["all"]
    two = {"n_questions": 3, "passage_recall@5": 1.0, "answer_recall@1024": 0.5, "answer_recall_questions": 2,
           "passage_recall_curve": [1.0], "no_answer_excluded": 1}
    one = {"n_questions": 1, "passage_recall@5": 0.0, "answer_recall@1024": 1.0, "answer_recall_questions": 1,
           "passage_recall_curve": [0.0], "no_answer_excluded": 0}
    all_of_them = merged([two, one])
    assert all_of_them["n_questions"] == 4 and all_of_them["no_answer_excluded"] == 1
    assert all_of_them["passage_recall@5"] == pytest.approx(0.75)
    assert all_of_them["answer_recall@1024"] == pytest.approx(2 / 3)
    assert all_of_them["passage_recall_curve"] == pytest.approx([0.75])
