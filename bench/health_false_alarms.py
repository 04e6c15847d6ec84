"""How often the health checks' reward warning (harness/report/health.py ``reward_went_down``) fires on curves that
do not fall: flat 4-step training curves with noise, independent or autocorrelated (AR(1)).

    .venv/bin/python bench/health_false_alarms.py [--trials 10000] [--steps 4] [--sd 0.1]

Seeded: the same figures on any machine.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from harness.report import health


def false_alarms(ar: float, steps: int, sd: float, trials: int, rng: np.random.Generator) -> float:
    warned = 0
    for _ in range(trials):
        noise = rng.normal(0.0, sd, steps)
        curve = [noise[0] / math.sqrt(1 - ar * ar)]  # the stationary spread from the first step
        for e in noise[1:]:
            curve.append(ar * curve[-1] + e)
        warned += health.reward_went_down([0.4 + x for x in curve]) is not None
    return warned / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10000)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--sd", type=float, default=0.1)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    print(f"flat {args.steps}-step curves, noise sd {args.sd}, {args.trials} trials: share warned")
    for ar in (0.0, 0.5, 0.8):
        print(f"  AR(1) {ar}: {false_alarms(ar, args.steps, args.sd, args.trials, rng):.3f}")


if __name__ == "__main__":
    main()
