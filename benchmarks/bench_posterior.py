"""Posterior geometry: the default ("auto": the partial chart) against the factored model and the full chart.

Paper simulation (d_x = 20, d_a = 10, d_s = 20, r = 3, q = 1 or ``--imbalance``), both Θ* kinds, N = 1,000 …
30,000. Each parametrisation starts from the same frequentist fit and runs the same NUTS
settings (nutpie unless ``--sampler``): ``factored`` (the plain U Vᵀ model),
``chart`` (every component charted) and ``auto`` (the default: the components the data
determine charted, the rest factored; ``r1`` says how many). For each, the table prints the
mean leapfrog steps per draw, the mean step size, the wall time of ``fit_posterior`` (numba
compilation included), the smallest bulk and tail ESS over the identified coordinates of θ_rtv
and the identified entries of Θ, ESS per second (θ_rtv's alone beside it), the largest R-hat
over the same and over θ_rtv alone, the divergences and the seconds of the frequentist start
(not in ``secs``); ``sample`` is the sampler's own time (no compilation) and ``sampled`` θ_rtv's
ESS per second of it; ``compile`` the seconds nutpie's compilation took (``--repeat 2`` fits each
cell twice: the second reuses the compiled model, :mod:`bayes_loco.bayes.samplers`); ``ESS/1k grad``
the smallest bulk ESS per 1,000 of the kept run's gradient evaluations (its leapfrog steps: the cost
that does not depend on the machine) and ``runs`` the NUTS runs of the fit's plan. Then, per
cell, the ratios to the factored model of steps and of ESS per second. ``angle`` is the start's
largest ``ChartFrame.angles``.
A CSV of every row goes to ``--out``.

    .venv/bin/python benchmarks/bench_posterior.py                       # the grid below, ~1 h on 2 cores
    .venv/bin/python benchmarks/bench_posterior.py --sizes 1000 3000 --kinds diagonal
    .venv/bin/python benchmarks/bench_posterior.py --sizes 100000 --rank 3 --only auto --draws 1000
    .venv/bin/python benchmarks/bench_posterior.py --imbalance 10 --kinds paper --sizes 10000 100000 \
        --only auto --chains 4 --draws 1000     # the q = 10 cell
"""

from __future__ import annotations

import argparse
import time
import warnings

import arviz as az
import numpy as np
import pandas as pd

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import chart
from bayes_loco.coordinates import VecCoordinates
from bayes_loco.trees import identified_coordinates

MODELS = ["factored", "chart", "auto"]


def identified_ess(post: bb.Posterior) -> dict:
    """Min bulk/tail ESS and max R-hat over θ_rtv's identified coordinates and Θ's identified entries.

    Also θ_rtv's alone (``rtv_ess_bulk``, ``rtv_r_hat``), on which the efficiency targets are stated.
    """
    tree = post.tree
    rtv = az.summary(tree, var_names=["theta_rtv"], kind="diagnostics", round_to="none")[post.identified]
    vec = VecCoordinates(post.data.d_x, post.data.d_phi)
    mask = identified_coordinates(bl.identified_directions(vec, post.data))
    theta = az.summary(tree, var_names=["theta"], kind="diagnostics", round_to="none")[mask]
    both = pd.concat([rtv, theta])
    return {"ess_bulk": float(both["ess_bulk"].min()), "ess_tail": float(both["ess_tail"].min()),
            "r_hat": float(both["r_hat"].max()), "rtv_ess_bulk": float(rtv["ess_bulk"].min()),
            "rtv_r_hat": float(rtv["r_hat"].max())}


def run_cell(data, start, rank: int, model: str, args) -> dict:
    """One fit of ``model`` ("factored", "chart": all r components charted, "auto": the default)."""
    nuts = {"draws": args.draws, "tune": args.tune, "chains": args.chains, "sampler": args.sampler,
            "parametrization": model}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = bb.fit_posterior(data, rank, nuts=nuts, start=start, progressbar=False, predictive_draws=0,
                                random_seed=args.seed)
    seconds = time.perf_counter() - t0
    stats = post.tree["sample_stats"]
    row = {"model": model, "r1": post.settings["nuts"]["chart_rank"] or 0,
           "steps": float(stats["n_steps"].mean()), "step_size": float(stats["step_size"].mean()),
           "seconds": seconds,
           "sampling_seconds": float(post.tree["posterior"].attrs.get("sampling_time", np.nan)),
           "compile_seconds": float(post.tree["posterior"].attrs.get("compile_time", np.nan)),
           "reused": int(post.tree["posterior"].attrs.get("compiled_model_reused", 0)),
           "divergences": int(stats["diverging"].sum())}
    row |= identified_ess(post)
    row["ess_per_s"] = row["ess_bulk"] / seconds
    row["rtv_ess_per_s"] = row["rtv_ess_bulk"] / seconds
    row["rtv_ess_per_sampling_s"] = row["rtv_ess_bulk"] / row["sampling_seconds"]
    # The cost that does not depend on the machine: the kept run's gradient evaluations (leapfrog steps).
    row["ess_per_1000_gradients"] = 1000 * row["ess_bulk"] / float(stats["n_steps"].sum())
    row["attempts"] = len(post.settings["plan"]["attempts"])
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000, 30000])
    parser.add_argument("--kinds", nargs="+", default=["paper", "diagonal"])
    parser.add_argument("--rank", type=int, default=3)
    parser.add_argument("--imbalance", type=float, default=1.0, help="q of the paper simulation")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--sampler", default="nutpie")
    parser.add_argument("--only", nargs="+", choices=MODELS, default=MODELS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="posterior_geometry.csv")
    parser.add_argument("--repeat", type=int, default=1,
                        help="fits per cell; the second and later reuse nutpie's compiled model")
    args = parser.parse_args()
    which = [m for m in MODELS if m in args.only]
    rows = []
    header = (f"{'kind':>8} {'N':>7} {'model':>9} {'r1':>2} {'steps':>6} {'step':>6} {'secs':>7} "
              f"{'sample':>7} {'ESS bulk':>8} {'tail':>6} {'ESS/s':>7} {'θ_rtv/s':>7} {'sampled':>7} "
              f"{'R-hat':>6} {'θ_rtv':>6} {'div':>4} {'angle':>6} {'start s':>7} {'compile':>7} "
              f"{'ESS/1k grad':>11} {'runs':>4}")
    print(header, flush=True)
    for kind in args.kinds:
        problem = bl.simulate.paper_problem(rank=args.rank, imbalance=args.imbalance, theta_kind=kind)
        for n in args.sizes:
            data = problem.sample(n, seed=args.seed)
            t0 = time.perf_counter()
            start = bl.fit_low_rank(data, args.rank, ridge=1.0)
            start_seconds = time.perf_counter() - t0
            frame = chart.chart_frame(data, start.theta, args.rank)
            for model in [m for m in which for _ in range(args.repeat)]:
                row = {"kind": kind, "n": n, "max_angle": float(frame.angles.max()),
                       "start_seconds": start_seconds}
                row |= run_cell(data, start, args.rank, model, args)
                rows.append(row)
                print(f"{kind:>8} {n:>7} {model:>9} {row['r1']:2d} {row['steps']:6.1f} "
                      f"{row['step_size']:6.3f} {row['seconds']:7.1f} {row['sampling_seconds']:7.1f} "
                      f"{row['ess_bulk']:8.0f} {row['ess_tail']:6.0f} {row['ess_per_s']:7.2f} "
                      f"{row['rtv_ess_per_s']:7.2f} {row['rtv_ess_per_sampling_s']:7.2f} {row['r_hat']:6.3f} "
                      f"{row['rtv_r_hat']:6.3f} {row['divergences']:4d} {row['max_angle']:6.2f} "
                      f"{start_seconds:7.1f} {row['compile_seconds']:7.2f} "
                      f"{row['ess_per_1000_gradients']:11.2f} {row['attempts']:4d}", flush=True)
                pd.DataFrame(rows).to_csv(args.out, index=False)
    table = pd.DataFrame(rows)
    if "factored" in which and len(which) > 1:
        wide = table.pivot_table(index=["kind", "n"], columns="model",
                                 values=["steps", "ess_per_s", "rtv_ess_per_s", "rtv_ess_per_sampling_s"])
        ratios = pd.DataFrame({f"{what} {model}/factored": wide[column][model] / wide[column]["factored"]
                               for model in which if model != "factored"
                               for what, column in (("steps", "steps"), ("ESS/s", "ess_per_s"),
                                                    ("θ_rtv ESS/s", "rtv_ess_per_s"),
                                                    ("θ_rtv ESS/sampling s", "rtv_ess_per_sampling_s"))})
        print("\n" + ratios.round(2).to_string())
    for kind, group in table.groupby("kind"):
        for model, sub in group.groupby("model"):
            sub = sub.sort_values("n")
            if len(sub) > 1:
                growth = sub["steps"].iloc[-1] / sub["steps"].iloc[0]
                print(f"{kind}, {model}: steps per draw grow {growth:.2f}x from "
                      f"N = {sub['n'].iloc[0]} to N = {sub['n'].iloc[-1]}")
    print(f"\nrows written to {args.out}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
