"""Scale: the paper's runtime table, and the frequentist road at LLM-width features.

``--target runtime`` (default). The work the paper times for one replication of its runtime
table: simulate N = 10,000 comparisons (q = 3, r = 3) and a 200-pair population, fit the MLE and PRS, build
MLE-Pessimistic's and PRS's Gram sets (C₂ = 5) and solve the three methods' policies
(MLE-Greedy, MLE-Pessimistic, PRS; relaxed objective), for each (d_x, d_φ = 9 + d_s) of the
``runtime`` study. Each stage is the median over ``--reps`` replications; ``paper`` is the
paper's reported seconds for all three methods (its own hardware; reported at 30 × 30 and
100 × 50 only) and ``ratio`` the paper's over ours. The target is a ratio of at least 50 on
every reported row.

``--target width``. d_x = 32, d_φ = 4096 dense (the paper's simulation with 4,067 pure-noise
feature dimensions, so every column of ΔΦ is reached), r = 4 (k = 16,496), N comparisons
(default 100,000), a population of 2,000 units × 10 actions: the FGD fit (its start as
``start="auto"`` picks), PRS's reduced MLE, the calibrated Wald set (Fisher information and its
factorisation) and the exact pessimistic policy (the first-order solver: k_eff > 1,000), each
printed with its seconds and the process's peak resident memory as it finishes (the
budget: 15 minutes and 10 GB, data included), then the policy's certificate and the totals
against that budget. The data are simulated first and not timed. Machines differ: the run
first measures this one's GEMM rate and memory bandwidth (the Fisher information is
compute-bound, FGD and the reduced MLE read ΔΦ), so a time can be read against the machine it
was taken on.

    .venv/bin/python benchmarks/bench_scale.py            # 5 rows x 3 reps, about a minute
    .venv/bin/python benchmarks/bench_scale.py --reps 5
    .venv/bin/python benchmarks/bench_scale.py --target width --n 30000 --theta-kind diagonal
"""

from __future__ import annotations

import argparse
import resource
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


def peak_gib() -> float:
    """The process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


BUDGET_SECONDS, BUDGET_GB = 900.0, 10.0


def machine() -> str:
    """This machine's GEMM rate (4096² doubles, all threads) and read bandwidth, each the best of 3."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4096, 4096))
    big = rng.standard_normal(2**27)  # 1 GiB
    gemm, read = [], []
    for _ in range(3):
        start = time.perf_counter()
        a @ a
        gemm.append(2 * 4096**3 / (time.perf_counter() - start) / 1e9)
        start = time.perf_counter()
        big.sum()
        read.append(big.nbytes / (time.perf_counter() - start) / 1e9)
    return f"machine: GEMM {max(gemm):.0f} GFLOP/s, read {max(read):.1f} GB/s"


def width(n: int, theta_kind: str, units: int = 2000) -> None:
    """The LLM-width pipeline, stage by stage, printing seconds and peak memory as each ends."""
    print(machine(), flush=True)
    problem = bl.simulate.paper_problem(d_x=32, d_s=20, noise_dims=4096 - 29, rank=4, imbalance=3,
                                        theta_kind=theta_kind)
    start = time.perf_counter()
    data = problem.sample(n, seed=1)
    population = problem.population(units, seed=2)
    print(f"data (not timed): N = {data.n}, d_x = {data.d_x}, d_phi = {data.d_phi}, {units} units, "
          f"{time.perf_counter() - start:.1f} s, peak {peak_gib():.1f} GiB", flush=True)
    total = 0.0
    out = {}
    stages = [("FGD", lambda: bl.fit_low_rank(data, 4, ridge=1.0)),
              ("PRS reduced MLE", lambda: bl.fit_prs(data, 4, ridge=1.0, low_rank=out["FGD"])),
              # PRSResult.calibrated_set(0.9) in its two steps, to say where the time goes
              ("Fisher information", lambda: out["PRS reduced MLE"]._information()),
              ("Wald set", lambda: bl.wald_set(out["PRS reduced MLE"].estimate, out.pop("Fisher information"),
                                               0.9, out["PRS reduced MLE"].coordinates, overwrite=True)),
              ("exact policy", lambda: bl.pessimistic_policy(out["Wald set"], population, objective="exact"))]
    for name, make in stages:
        begin = time.perf_counter()
        out[name] = make()
        seconds = time.perf_counter() - begin
        total += seconds
        print(f"{name:>16}: {seconds:8.1f} s   total {total:8.1f} s   peak {peak_gib():5.1f} GiB", flush=True)
    fgd, wald, policy = out["FGD"], out["Wald set"], out["exact policy"]
    print(f"FGD start {fgd.start!r}, {fgd.diagnostics.n_iter} iterations; k = {out['PRS reduced MLE'].k}, "
          f"k_eff = {wald.effective_dim}, R = {wald.radius:.1f}")
    print(f"exact policy: {policy.status.value}, pessimistic value {policy.pessimistic_value:.4g}, "
          f"certificate {policy.certificate.lower:.4g} .. {policy.certificate.upper:.4g}, "
          f"{policy.n_mixed} mixed units, {int((policy.actions == 0).sum())} of {units} rows at the "
          f"reference action; {policy.message}")
    peak_gb = peak_gib() * 2**30 / 1e9
    print(f"total {total:.0f} s against the budget's {BUDGET_SECONDS:.0f} s "
          f"(ratio {total / BUDGET_SECONDS:.2f}); peak {peak_gb:.1f} GB against {BUDGET_GB:.0f} GB "
          f"(ratio {peak_gb / BUDGET_GB:.2f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=["runtime", "width"], default="runtime")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--theta-kind", default="paper", choices=["paper", "diagonal"])
    args = parser.parse_args()
    if args.target == "width":
        width(args.n, args.theta_kind)
        return
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
