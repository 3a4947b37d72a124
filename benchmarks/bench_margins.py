"""The log density and gradient of fit_posterior's models with rows grouped, against the N-row graph.

For each N, the paper simulation (d_x = 20, d_a = 10, d_s = 20, r = 3, q = ``--imbalance``) and a
users × items problem (``--users`` contexts and ``--items`` items, both repeated), the factored
model and the default's chart model are built twice, with ``group_rows=False`` (the plain graph:
X U and ΔΦ V) and ``group_rows=True`` (:mod:`bayes_loco.bayes.margins`), compiled with numba as
nutpie compiles them, and the log density and its gradient evaluated at the same point. ``plain``
and ``grouped`` are the best of ``--repeat`` means over ``--calls`` evaluations (milliseconds);
``ratio`` is plain over grouped, measured in the same run; ``|Δ logp|`` checks that they agree.

    .venv/bin/python benchmarks/bench_margins.py
    .venv/bin/python benchmarks/bench_margins.py --sizes 10000 100000 --calls 50
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pytensor
import pytensor.tensor as pt

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import chart
from bayes_loco.bayes.margins import row_layout


def users_items(n: int, users: int, items: int, seed: int) -> bl.PreferenceData:
    """Contexts from ``users`` users and differences of ``items`` items' features, labels from a rank-3 Θ."""
    rng = np.random.default_rng(seed)
    x_users, phi = rng.standard_normal((users, 20)), rng.standard_normal((items, 29))
    who = rng.integers(users, size=n)
    a = rng.integers(items, size=n)
    b = (a + 1 + rng.integers(items - 1, size=n)) % items
    x, dphi = x_users[who], phi[a] - phi[b]
    theta = rng.standard_normal((20, 3)) @ rng.standard_normal((3, 29)) / 10
    y = (rng.random(n) < 1 / (1 + np.exp(-np.sum((x @ theta) * dphi, axis=1)))).astype(np.int8)
    return bl.PreferenceData(x, dphi, y)


def timed_logp(model, calls: int, repeat: int) -> tuple[float, float]:
    """(best mean milliseconds per log density and gradient, the log density) at a fixed point."""
    logp = model.logp()
    fn = pytensor.function(model.value_vars, [logp, *pt.grad(logp, model.value_vars)], mode="NUMBA")
    rng = np.random.default_rng(0)
    point = [value + 0.01 * rng.standard_normal(np.shape(value))
             for value in (model.initial_point()[v.name] for v in model.value_vars)]
    value = float(fn(*point)[0])
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*point)
        best = min(best, (time.perf_counter() - start) / calls * 1e3)
    return best, value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3000, 10000, 30000])
    parser.add_argument("--imbalance", type=float, default=10.0)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'problem':>12} {'N':>7} {'model':>8} {'layout':>22} {'plain ms':>9} {'grouped ms':>10} "
          f"{'ratio':>6} {'|Δ logp|':>9}", flush=True)
    for n in args.sizes:
        problems = {"paper": bl.simulate.paper_problem(rank=3, imbalance=args.imbalance).sample(n, seed=1),
                    "users-items": users_items(n, args.users, args.items, seed=1)}
        for name, data in problems.items():
            sizes = row_layout(data, 3).sizes
            layout = ", ".join(f"{k} {v}" for k, v in sizes.items() if v is not None) or "rows"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = bl.fit_low_rank(data, 3, ridge=1.0)
            frame = chart.chart_frame(data, start.theta, 3)
            frame = chart.partial_frame(frame, data, max(frame.determined_rank, 1))
            builders = {"factored": lambda group, d=data: bb.build_model(d, 3, group_rows=group),
                        "chart": lambda group, d=data, f=frame: bb.build_chart_model(d, 3, f,
                                                                                     group_rows=group)}
            for model_name, build in builders.items():
                plain, lp_plain = timed_logp(build(False), args.calls, args.repeat)
                grouped, lp_grouped = timed_logp(build(True), args.calls, args.repeat)
                print(f"{name:>12} {n:>7} {model_name:>8} {layout:>22} {plain:9.3f} {grouped:10.3f} "
                      f"{plain / grouped:6.2f} {abs(lp_plain - lp_grouped):9.1e}", flush=True)


if __name__ == "__main__":
    main()
