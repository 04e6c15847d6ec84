"""How often each interval over seeds covers the true mean (harness/report/compare.py): the hierarchical bootstrap,
Student's t-interval over the seeds' means, and the wider of the two, which the report judges by.

    .venv/bin/python bench/seed_interval_coverage.py [--trials 1000] [--seeds 3] [--json PATH]

Each trial draws every seed's true pass rate around 0.5 (normal, sd ``seed_sd``: training variance), then its
problems' outcomes (0/1) from that rate, and asks whether each 95% interval holds 0.5. Cases go from problem noise
dominating (16 problems, seed sd 0.1) to seed variance dominating (256 problems, seed sd 0.15). Seeded: the same
figures every time, on any machine (numpy's generator).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from harness.report.compare import hierarchical_bootstrap, t_interval_over_seeds

CASES = ((0.1, 16), (0.15, 64), (0.15, 256))  # (seed sd, problems per seed)
TRUE_MEAN = 0.5


def coverage(seed_sd: float, problems: int, seeds: int, trials: int, rng: np.random.Generator) -> dict[str, float]:
    held = {"hierarchical bootstrap": 0, "t over seed means": 0, "wider (the report's)": 0}
    for trial in range(trials):
        rates = np.clip(rng.normal(TRUE_MEAN, seed_sd, seeds), 0, 1)
        groups = [list((rng.random(problems) < r).astype(float)) for r in rates]
        low, high = hierarchical_bootstrap(groups, seed=trial, resamples=1000)
        t_low, t_high = t_interval_over_seeds([float(np.mean(g)) for g in groups])
        held["hierarchical bootstrap"] += low <= TRUE_MEAN <= high
        held["t over seed means"] += t_low <= TRUE_MEAN <= t_high
        held["wider (the report's)"] += min(low, t_low) <= TRUE_MEAN <= max(high, t_high)
    return {name: count / trials for name, count in held.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    results = []
    print(f"95% intervals over {args.seeds} seeds, {args.trials} trials each: share that covers the true mean")
    for seed_sd, problems in CASES:
        covered = coverage(seed_sd, problems, args.seeds, args.trials, rng)
        results.append({"seed_sd": seed_sd, "problems": problems, "coverage": covered})
        print(f"  seed sd {seed_sd}, {problems} problems: " + ", ".join(f"{k} {v:.3f}" for k, v in covered.items()))
    if args.json:
        args.json.write_text(json.dumps({"seeds": args.seeds, "trials": args.trials, "cases": results}, indent=2))


if __name__ == "__main__":
    main()
