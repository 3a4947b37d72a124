"""Scale (issue #20): the paper's runtime table, timed stage by stage, against the paper's seconds.

The work the paper times for one replication of its runtime table: simulate N = 10,000
comparisons (q = 3, r = 3) and a 200-pair population, fit the MLE and PRS, build
MLE-Pessimistic's and PRS's Gram sets (C₂ = 5) and solve the three methods' policies
(MLE-Greedy, MLE-Pessimistic, PRS; relaxed objective), for each (d_x, d_φ = 9 + d_s) of the
``runtime`` study. Each stage is the median over ``--reps`` replications; ``paper`` is the
paper's reported seconds for all three methods (its own hardware; reported at 30 × 30 and
100 × 50 only) and ``ratio`` the paper's over ours. The issue's target is a ratio of at least
50 on every reported row.

    .venv/bin/python benchmarks/bench_scale.py            # 5 rows x 3 reps, about a minute
    .venv/bin/python benchmarks/bench_scale.py --reps 5
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

import bayes_loco as bl

# The paper's runtime table (all three methods, N = 10,000, r = 3): seconds by (d_x, d_φ).
PAPER_SECONDS = {(30, 30): 51.9, (100, 50): 251.3}
ROWS = [(30, 30), (30, 50), (50, 50), (100, 30), (100, 50)]
STAGES = ["data", "MLE fit", "MLE Gram set", "PRS fit", "PRS Gram set", "policies"]


def replication(d_x: int, d_phi: int, seed: int, *, n: int = 10_000, rank: int = 3,
                ridge: float = 1.0) -> dict:
    """Seconds of each stage of one replication, as the ``runtime`` study does it."""
    seconds = {}

    def timed(stage, fn):
        start = time.perf_counter()
        out = fn()
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - start
        return out

    def simulate():
        problem = bl.simulate.paper_problem(d_x=d_x, d_s=d_phi - 9, rank=rank, imbalance=3, seed=seed)
        return problem.sample(n, seed=seed + 1), problem.population(200, seed=seed + 2)

    data, population = timed("data", simulate)
    mle = timed("MLE fit", lambda: bl.fit_mle(data, ridge=ridge))
    mle_set = timed("MLE Gram set", lambda: mle.penalty_set(5.0))
    prs = timed("PRS fit", lambda: bl.fit_prs(
        data, rank, ridge=ridge, low_rank=bl.fit_low_rank(data, rank, ridge=ridge, initial=mle)))
    prs_set = timed("PRS Gram set", lambda: prs.penalty_set(5.0))
    timed("policies", lambda: (bl.greedy_policy(mle.theta, population),
                               bl.pessimistic_policy(mle_set, population, objective="relaxed"),
                               bl.pessimistic_policy(prs_set, population, objective="relaxed")))
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    records = []
    for d_x, d_phi in ROWS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = pd.DataFrame([replication(d_x, d_phi, seed) for seed in range(args.reps)])
        row = {"d_x": d_x, "d_phi": d_phi, **runs.median().to_dict()}
        row["total"] = runs.sum(axis=1).median()
        paper = PAPER_SECONDS.get((d_x, d_phi), np.nan)
        row["paper"], row["ratio"] = paper, paper / row["total"]
        records.append(row)
        print(f"{d_x} x {d_phi}: {row['total']:.2f} s", flush=True)
    table = pd.DataFrame(records)
    print("\n" + table.to_string(index=False, float_format="%.2f", na_rep="-"))
    reported = table.dropna(subset=["paper"])
    print(f"\nsmallest ratio over the paper's reported rows: {reported['ratio'].min():.1f}x (target: 50x)")


if __name__ == "__main__":
    main()
