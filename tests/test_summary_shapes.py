"""`summary_table` on every shape of metric that trainers and searchers write (searchers/best_of_k.py, evolve.py,
trainers/*.py): a metric of one phase only (evolve's children/<how>: `harness run --searcher evolve` once crashed in
`_table` after saying complete), strings, ints, None, training curves (empty ones too), nested names, other
prefixes, and an evaluation-only run."""

from __future__ import annotations

import re

from harness.report.summary import summary_table

# What a trained run with --searcher evolve wrote: children/rewrite before only, children/failed after only.
EVOLVE = {
    "before/solved@1": 0.25,
    "after/solved@1": 0.5,
    "before/solved@16": 0.5,
    "after/solved@16": 0.75,
    "before/success_rate": 0.5,
    "after/success_rate": 0.75,
    "before/best_fitness": 0.5,
    "after/best_fitness": 0.75,
    "before/best/correct": 0.5,
    "after/best/correct": 0.75,
    "before/budget/calls": 12,
    "after/budget/calls": 9,
    "before/generations": 1.5,
    "after/generations": 1.0,
    "before/children/seed": 4,
    "after/children/seed": 4,
    "before/children/rewrite": 8,  # no rewrite after training
    "after/children/failed": 1,  # and a failed child only after
    "before/malformed_rollouts": 0,
    "after/malformed_rollouts": 2,
}
# best-of-k (M = 2 answers per rollout) and GRPO / VSPO / RLAIF / SFT / the format warm-up around it.
BEST_OF_K = {
    "before/pass@1": 0.25,
    "after/pass@1": 0.5,
    "before/best@1": 0.25,
    "after/best@1": 0.5,
    "before/pooled_pass@2": 0.125,
    "after/pooled_pass@2": 0.25,
    "before/mean_reward/correct": 0.25,
    "after/mean_reward/correct": 0.375,
    "before/unparsed_rate": 0.5,
    "after/unparsed_rate": 0.25,
    "before/num_candidates": 8,
    "after/num_candidates": 8,
    "before/num_tokens": 100,
    "after/num_tokens": 90,
    "before/diversity/coverage": None,
    "after/diversity/coverage": 0.5,
    "before/behaviour/conciseness": 0.5,
    "after/behaviour/conciseness": 0.625,
    "before/note": "n/a",
    "after/note": "n/a",  # a third-party searcher's string
    "train/reward_mean": [0.1, 0.2, 0.4],
    "train/loss": [0.5, None],
    "train/kl": [],  # a step not logged yet: []
    "train/grad_norm": [1.0],
    "train/reward/correct": [0.0, 0.5],
    "train/time/generation": [1.0, 2.0],
    "train/mismatch/abs_log_ratio_mean": [0.0, 0.0],
    "warmup/well_formed_rates": [0.1, 0.9],
    "warmup/steps": 3,
    "rlaif/teacher_calls": 2,
    "sft/targets": 4,
    "vspo/vector_layer": 5,
    "vspo/vector_teacher": "policy",
    "seconds": 1.5,  # a key without a "/" (update_metrics allows it)
}


def cells(table: str) -> list[list[str]]:
    """A printed table's rows as cells, cut at its "----" line's column spans (an empty cell stays "")."""
    lines = table.splitlines()
    spans = [m.span() for m in re.finditer(r"-+", lines[1])]
    assert set(lines[1]) <= {"-", " "}, lines[1]
    return [
        [line[a : b if i < len(spans) - 1 else None].strip() for i, (a, b) in enumerate(spans)]
        for line in lines
        if line is not lines[1]
    ]


def blocks(text: str) -> list[list[list[str]]]:
    return [cells(block) for block in text.split("\n\n")]


def test_a_metric_of_one_phase_gets_an_empty_change_cell():
    (evaluation,) = blocks(summary_table(EVOLVE))
    rows = {row[0]: row for row in evaluation}
    assert evaluation[0] == ["metric", "before", "after", "change"]
    assert rows["children/rewrite"] == ["children/rewrite", "8", "-", ""]
    assert rows["children/failed"] == ["children/failed", "-", "1", ""]
    assert rows["children/seed"] == ["children/seed", "4", "4", "+0"]  # ints stay whole
    assert rows["budget/calls"] == ["budget/calls", "12", "9", "-3"]
    assert rows["solved@16"] == ["solved@16", "0.500", "0.750", "+0.250"]
    assert rows["generations"] == ["generations", "1.500", "1.000", "-0.500"]
    assert [row[0] for row in evaluation[1:3]] == ["solved@1", "solved@16"]  # headline k in order, first
    assert all(len(row) == 4 for row in evaluation)


def test_every_shape_a_trained_best_of_k_run_writes():
    evaluation, training = blocks(summary_table(BEST_OF_K))
    rows = {row[0]: row for row in evaluation}
    assert [row[0] for row in evaluation[1:5]] == [
        "best@1",
        "pass@1",
        "pooled_pass@2",
        "behaviour/conciseness (training scorer; no held-out evaluator)",
    ]
    assert rows["pass@1"] == ["pass@1", "0.250", "0.500", "+0.250"]
    assert rows["diversity/coverage"] == ["diversity/coverage", "-", "0.500", ""]  # None: no change
    assert rows["note"] == ["note", "n/a", "n/a", ""]  # strings: no change
    assert rows["num_tokens"] == ["num_tokens", "100", "90", "-10"]
    assert rows["pooled_pass@2"] == ["pooled_pass@2", "0.125", "0.250", "+0.125"]
    assert "seconds" not in rows and "vector_layer" not in rows  # only evaluation phases
    assert training == [
        ["training", "first step", "last step", "steps"],
        ["reward_mean", "0.100", "0.400", "3"],
        ["loss", "0.500", "-", "2"],
        ["grad_norm", "1.000", "1.000", "1"],
        ["reward/correct", "0.000", "0.500", "2"],
    ]


def test_an_evaluation_only_run_has_no_change_column():
    table = summary_table(
        {
            "eval/pass@1": 0.5,
            "eval/children/rewrite": 3,
            "eval/diversity/embedding": None,
            "eval/note": "x",
            "eval/budget/tokens": 40,
        }
    )
    (evaluation,) = blocks(table)
    assert evaluation == [  # the task's figures, a rule, then the bookkeeping (budgets and counts)
        ["metric", "eval"],
        ["pass@1", "0.500"],
        ["diversity/embedding", "-"],
        ["note", "x"],
        ["-------------------", "-----"],
        ["budget/tokens", "40"],
        ["children/rewrite", "3"],
    ]


def test_tables_of_nothing_and_of_curves_only():
    assert summary_table({}) == ""
    assert summary_table({"seconds": 1.0, "train/kl": [], "rlaif/teacher_calls": 2}) == ""
    (training,) = blocks(summary_table({"train/reward_mean": [0.5, 0.25]}))
    assert training == [["training", "first step", "last step", "steps"], ["reward_mean", "0.500", "0.250", "2"]]


def test_a_phase_with_one_metric_of_the_other_and_odd_values():
    """before has only a count, after only a rate; a bool, a nan and a list as values still render."""
    table = summary_table(
        {
            "before/num_skipped": 0,
            "after/pass@1": float("nan"),
            "after/flag": True,
            "before/flag": False,
            "after/ids": [1, 2],
        }
    )
    rows = {row[0]: row for row in cells(table)}
    assert rows["num_skipped"] == ["num_skipped", "0", "-", ""]
    assert rows["pass@1"] == ["pass@1", "-", "nan", ""]
    assert rows["flag"] == ["flag", "False", "True", "+1"]
    assert rows["ids"] == ["ids", "-", "[1, 2]", ""]
