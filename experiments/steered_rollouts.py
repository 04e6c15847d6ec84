"""What a VSPO run's steering vector did to its training rollouts: for each run folder given, the rollouts sampled
under a negative, zero and positive strength (beta), with their mean length in characters, correct rate and
behaviour score, read from the run's samples.jsonl (phase "train").

VSPO's reward prefers the more strongly steered rollouts (r = r0 + alpha x beta), so the unsteered policy moves
towards whatever the positive direction produces. Whether that is the behaviour the vector was built for is the
question this answers: a vector whose positive side writes longer answers, not more robust ones, trains a policy
that rambles.

    python experiments/steered_rollouts.py runs/vspo_robustness/cpu/math-vspo-*
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


def summarise(run_dir: Path) -> list[str]:
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines() if line.strip()]
    train = [r for r in rows if r.get("phase") == "train" and "steering/beta" in (r.get("rewards") or {})]
    if not train:
        return [f"{run_dir.name}: no steered training rollouts (not a VSPO run with reward=strength?)"]
    behaviours = sorted({k for r in train for k in r["rewards"] if k.startswith("behaviour/")})
    lines = [f"{run_dir.name}: {len(train)} training rollouts"]
    for label, keep in (
        ("beta < 0", lambda b: b < -1e-6),
        ("beta = 0", lambda b: abs(b) <= 1e-6),
        ("beta > 0", lambda b: b > 1e-6),
    ):
        group = [r for r in train if keep(r["rewards"]["steering/beta"])]
        if not group:
            continue
        figures = {
            "chars": _mean(len(r["text"]) for r in group),
            "correct": _mean(r["rewards"].get("correct", 0.0) for r in group),
        }
        figures.update({name: _mean(r["rewards"][name] for r in group) for name in behaviours})
        lines.append(
            f"  {label}: {len(group):3d} rollouts  "
            + "  ".join(
                f"{name} {value:.0f}" if name == "chars" else f"{name} {value:.3f}" for name, value in figures.items()
            )
        )
    return lines


def _mean(values) -> float:
    values = list(values)
    return math.fsum(values) / len(values)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for folder in argv:
        path = Path(folder)
        if not (path / "samples.jsonl").is_file():
            print(f"{folder}: no samples.jsonl (not a run folder)", file=sys.stderr)
            continue
        print("\n".join(summarise(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
