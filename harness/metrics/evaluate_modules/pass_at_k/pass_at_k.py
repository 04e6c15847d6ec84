"""Unbiased pass@k as an `evaluate` metric; the formula lives in harness.metrics.unbiased (harness must be
importable where this runs). Load it by path: evaluate.load(harness.metrics.evaluate_module_path("pass_at_k"))."""

import datasets
import evaluate

from harness.metrics.unbiased import pass_at_ks

_DESCRIPTION = """Unbiased pass@k (Chen et al. 2021): the chance that at least one of k samples drawn without
replacement from a problem's n samples is correct, 1 - C(n-c, k) / C(n, k), averaged over problems. Reported only
for k <= the fewest samples any problem has."""

_CITATION = """@article{chen2021codex, title={Evaluating Large Language Models Trained on Code},
author={Chen, Mark and others}, journal={arXiv preprint arXiv:2107.03374}, year={2021}}"""

_KWARGS_DESCRIPTION = """
Args:
    successes: one row per problem, a list with 0 or 1 for each of its samples.
    k: an int or a list of ints (default [1]).
Returns:
    {"pass@1": float, ...}, one key per k that every problem has at least k samples for.
Example:
    >>> metric.compute(successes=[[1, 0, 0, 1]], k=[1, 2])
    {'pass@1': 0.5, 'pass@2': 0.8333333333333334}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class PassAtK(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # datasets.Sequence rather than List: List only exists from datasets 4.0
            features=datasets.Features({"successes": datasets.Sequence(datasets.Value("int32"))}),
        )

    def _compute(self, successes, k=1):
        ks = [k] if isinstance(k, int) else list(k)
        per_problem = []
        for row in successes:
            if any(s not in (0, 1) for s in row):
                raise ValueError(f"successes must be 0 or 1, got {row}")
            per_problem.append((len(row), sum(row)))
        return {f"pass@{kk}": value for kk, value in pass_at_ks(per_problem, ks).items()}
