"""Unbiased best@k as an `evaluate` metric; the formula lives in harness.metrics.unbiased (harness must be
importable where this runs). Load it by path: evaluate.load(harness.metrics.evaluate_module_path("best_at_k"))."""

import datasets
import evaluate

from harness.metrics.unbiased import best_at_ks

_DESCRIPTION = """Unbiased best@k: the expected maximum score of k samples drawn without replacement from a
problem's n scored samples, sum_i s_(i) C(i-1, k-1) / C(n, k) over the ascending scores, averaged over problems.
With 0/1 scores it equals pass@k. Reported only for k <= the fewest samples any problem has."""

_CITATION = """@article{chen2021codex, title={Evaluating Large Language Models Trained on Code},
author={Chen, Mark and others}, journal={arXiv preprint arXiv:2107.03374}, year={2021}}"""

_KWARGS_DESCRIPTION = """
Args:
    scores: one row per problem, a list with a float score for each of its samples.
    k: an int or a list of ints (default [1]).
Returns:
    {"best@1": float, ...}, one key per k that every problem has at least k samples for.
Example:
    >>> metric.compute(scores=[[0.1, 0.5, 0.9]], k=[1, 2])
    {'best@1': 0.5, 'best@2': 0.7666666666666666}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class BestAtK(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # datasets.Sequence rather than List: List only exists from datasets 4.0
            features=datasets.Features({"scores": datasets.Sequence(datasets.Value("float64"))}),
        )

    def _compute(self, scores, k=1):
        ks = [k] if isinstance(k, int) else list(k)
        return {f"best@{kk}": value for kk, value in best_at_ks(scores, ks).items()}
