"""The JAX paths (numpyro; nutpie over JAX) against nutpie over numba at the same chart: steps per draw, time.

Paper simulation (d_x = 20, d_a = 10, d_s = 20, r = 3, q = ``--imbalance``), N = ``--sizes``. Each
cell fits the same data from the same frequentist start with each sampler in ``--samplers`` (``nutpie``:
its log density compiled by numba for the CPU; ``nutpie-jax``: jitted by JAX on JAX's default device,
nutpie's ``backend="jax"``; ``numpyro``) and the
same chart (``--chart-rank`` r₁ components charted; ``fit_posterior``'s "chart" with that
``chart_rank``, so no fall-back can swap the coordinates between samplers). ``default`` is instead
``fit_posterior(data, --rank)`` with every default but the length (its own start, coordinates,
sampler and retries; the table's statistics are of the run it kept), each of its NUTS runs logged
as it starts and ends: the whole default's time, on the device where it ran. The table gives the
mean leapfrog steps per draw, the smallest bulk and tail ESS and the largest R-hat over Θ and
θ_rtv (``Posterior.diagnostics``), the divergences, the sampler's own seconds and the whole fit's,
and per cell the ratio of each JAX path's steps per draw to nutpie's.

numpyro and nutpie-jax run on JAX's default device (a GPU where JAX sees one); nutpie on the CPU.
``--kernel '{"dense_mass": true}'`` passes extra options to numpyro's NUTS kernel, to try
alternatives to the package's own. Run where a GPU is present, and on the CPU for reference:

    .venv/bin/python benchmarks/bench_jax.py --sizes 10000 --imbalance 1 --chart-rank 2
    .venv/bin/python benchmarks/bench_jax.py --sizes 10000 100000 --imbalance 10 --chart-rank 1 \\
        --samplers nutpie-jax
    .venv/bin/python benchmarks/bench_jax.py --sizes 100000 --imbalance 10 --samplers default
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import warnings

import numpy as np
import pandas as pd
import pymc as pm

import bayes_loco as bl
from bayes_loco import bayes as bb

SAMPLERS = ["nutpie", "nutpie-jax", "numpyro", "default"]


def with_kernel_options(options: dict):
    """``pm.sample`` with ``options`` added to numpyro's NUTS kernel (other samplers unchanged)."""
    sample = pm.sample

    def patched(*args, **kwargs):
        if kwargs.get("nuts_sampler") == "numpyro":
            kwargs["nuts"] = {**kwargs.get("nuts", {}), **options}
        return sample(*args, **kwargs)

    return patched


def run_cell(data, start, sampler: str, args) -> dict:
    nuts = {"draws": args.draws, "tune": args.tune, "chains": args.chains}
    if sampler == "default":
        start = None
    else:
        nuts |= {"sampler": sampler.split("-")[0], "parametrization": "chart", "chart_rank": args.chart_rank}
    if sampler.startswith("nutpie"):
        nuts["backend"] = "jax" if sampler == "nutpie-jax" else "numba"
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = bb.fit_posterior(data, args.rank, nuts=nuts, start=start, progressbar=False,
                                predictive_draws=0, random_seed=args.seed)
    seconds = time.perf_counter() - t0
    stats, d = post.tree["sample_stats"], post.diagnostics
    return {"sampler": sampler, "steps": float(stats["n_steps"].mean()),
            "step_size": float(stats["step_size"].mean()), "ess_bulk": d.min_ess_bulk,
            "ess_tail": d.min_ess_tail, "r_hat": d.max_rhat, "divergences": d.divergences,
            "sampling_seconds": float(post.tree["posterior"].attrs.get("sampling_time", np.nan)),
            "seconds": seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000])
    parser.add_argument("--imbalance", type=float, default=1.0, help="q of the paper simulation")
    parser.add_argument("--rank", type=int, default=3)
    parser.add_argument("--chart-rank", type=int, default=2, help="r₁, the components charted")
    parser.add_argument("--samplers", nargs="+", default=["nutpie", "numpyro"], choices=SAMPLERS)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kernel", type=json.loads, default={}, help="extra numpyro NUTS options (JSON)")
    parser.add_argument("--out", default="jax_vs_nutpie.csv")
    args = parser.parse_args()
    # Each NUTS run of the default as it starts and ends (bayes_loco.bayes.fit logs them at INFO).
    logging.basicConfig(level=logging.WARNING, format="# %(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("bayes_loco.bayes.fit").setLevel(logging.INFO)
    if args.kernel:
        pm.sample = with_kernel_options(args.kernel)
    problem = bl.simulate.paper_problem(rank=args.rank, imbalance=args.imbalance)
    print(f"{'N':>7} {'sampler':>10} {'steps':>6} {'step':>6} {'ESS bulk':>8} {'tail':>6} {'R-hat':>6} "
          f"{'div':>4} {'sample s':>8} {'fit s':>7}", flush=True)
    rows = []
    for n in args.sizes:
        t0 = time.perf_counter()
        data = problem.sample(n, seed=args.seed)
        # The forced charts' shared start (the default makes its own).
        start = bl.fit_low_rank(data, args.rank, ridge=1.0) if set(args.samplers) - {"default"} else None
        # A phase line, so that a run stopped at a device call's limit still says how far it got.
        print(f"# N = {n}: data and start in {time.perf_counter() - t0:.1f} s", flush=True)
        for sampler in args.samplers:
            print(f"# N = {n}: {sampler} started at {time.strftime('%H:%M:%S')}", flush=True)
            row = {"n": n, "q": args.imbalance, "chart_rank": args.chart_rank,
                   "kernel": json.dumps(args.kernel)} | run_cell(data, start, sampler, args)
            rows.append(row)
            print(f"{n:>7} {sampler:>10} {row['steps']:6.1f} {row['step_size']:6.3f} {row['ess_bulk']:8.0f} "
                  f"{row['ess_tail']:6.0f} {row['r_hat']:6.3f} {row['divergences']:4d} "
                  f"{row['sampling_seconds']:8.1f} {row['seconds']:7.1f}", flush=True)
            pd.DataFrame(rows).to_csv(args.out, index=False)
    table = pd.DataFrame(rows)
    if "nutpie" in args.samplers:
        wide = table.pivot_table(index="n", columns="sampler", values="steps")
        for other in [s for s in args.samplers if s != "nutpie"]:
            for n, ratio in (wide[other] / wide["nutpie"]).items():
                print(f"N = {n}: {other} / nutpie steps per draw {ratio:.2f}")
    print(f"rows written to {args.out}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
