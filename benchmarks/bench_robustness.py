"""Robustness of the default posterior: every problem of a grid, the default against the factored model.

The paper grid: paper-simulation problems (§5.1 and diagonal Θ*) over N ∈ {300, 600, 1,000,
3,000, 10,000}, imbalance q ∈ {1, 3, 10}, rank r ∈ {1, 2, 3} and three shapes (d_x, d_a, d_s),
drawn from a seeded generator (:func:`grid`), plus a case the default once diverged on, first. On each problem
``fit_posterior`` runs twice with the same settings (4 chains × (1000 + 1000), nutpie, seed 0):
the default (``nuts.parametrization="auto"``) and ``"factored"``. For each fit the table gives
what ran (``ran``: factored, or chart:r₁; ``fb``: whether the default fell back to the factored
model after its chart failed), divergences, the largest R-hat and the smallest bulk/tail ESS
over Θ and θ_rtv (the fit's own diagnostics), wall seconds (each fit compiles its model: the
cache of :mod:`bayes_loco.bayes.samplers` is cleared first), the smallest ESS per second, and
``stopped_depth``: where the default's factored run was stopped in its warm-up for a chart, the
mean tree depth it was stopped at (``settings["geometry"]["stopped"]``).
``ratio`` is the default's ESS/s over the factored model's; where the default ran the factored model
alone, the two are one fit (the same draws) and the ratio is 1.

``--family features`` draws problems the paper's simulation does not: contexts with an intercept
and Gaussian coordinates of unequal scales, continuous action embeddings (4–29 actions, d_φ up to
15) compared with Zipf frequencies (exponent 0, 1 or 2: the rare actions' columns seldom reached),
a random Θ* of rank r with singular values in [0.5, 4], ties (none, read as half a win, or fitted
by Davidson's model) and, on a quarter of them, weights (:func:`feature_grid`, :func:`feature_data`).
``--family strangers`` draws the same kind of data from ten families a user may bring and no grid
above holds (:func:`stranger_grid`): wide contexts and features, near-separated and near-null Θ*,
a rank fitted above Θ*'s, N below 250, one-hot user groups, rank 4–5, no contexts at all, a dozen
distinct contexts, and a position bias the model does not have.

The CSV (``--out``) is written after every problem and read back on a rerun, so an interrupted
grid resumes where it stopped. The summary lines state the bars: the share of problems
where the default has no divergence and R-hat ≤ 1.01 (bar: ≥ 95 %), and the smallest ratio
(bar: ≥ 0.8).

    .venv/bin/python benchmarks/bench_robustness.py                    # 32 problems, ~1-2 h on 2 cores
    .venv/bin/python benchmarks/bench_robustness.py --problems 0 1 2   # a few of them
    .venv/bin/python benchmarks/bench_robustness.py --grid-seed 2027   # 32 problems not tuned for
    .venv/bin/python benchmarks/bench_robustness.py --family features --count 15 --grid-seed 9201
    .venv/bin/python benchmarks/bench_robustness.py --family strangers --count 20 --grid-seed 9601

``--rerun-partial OUT`` re-fits, with the current default alone, every problem of the grids in
``docs/data/robustness-*.csv`` whose default ran a partial chart (chart:r₁ with r₁ below the fitted
rank) when its grid ran, and writes each fit beside what that grid recorded (``before_*``): the
problems whose weak block a change to the partial chart reaches, in about 40 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import samplers

SHAPES = ((8, 6, 5), (12, 8, 6), (20, 10, 20))
SIZES = (300, 600, 1000, 3000, 10000)
IMBALANCES = (1, 3, 10)
RANKS = (1, 2, 3)
KINDS = ("paper", "diagonal")
# A case the default once diverged on: 23 times (142 with target_accept 0.95), the factored model did not.
FIRST_CASE = {"d_x": 8, "d_a": 6, "d_s": 5, "rank": 2, "imbalance": 3, "kind": "paper", "n": 1000,
              "problem_seed": 11, "data_seed": 12}


def grid(count: int = 32, seed: int = 2026) -> list[dict]:
    """That case and ``count − 1`` problems drawn from the product of the settings above.

    Every size, imbalance, rank and Θ* kind appears; N = 10,000 only on the smallest shape, so
    that the grid stays within about two hours on two cores.
    """
    rng = np.random.default_rng(seed)
    problems = [dict(FIRST_CASE)]
    i = 0
    while len(problems) < count:
        n = SIZES[i % len(SIZES)]
        q = IMBALANCES[(i // len(SIZES)) % len(IMBALANCES)]
        d_x, d_a, d_s = SHAPES[0] if n == 10000 else SHAPES[int(rng.integers(len(SHAPES)))]
        rank = int(rng.choice(RANKS))
        kind = KINDS[int(rng.integers(len(KINDS)))]
        if kind == "diagonal" and rank > d_a - 1:
            kind = "paper"
        seeds = {"problem_seed": int(rng.integers(1000)), "data_seed": int(rng.integers(1000))}
        problems.append({"d_x": d_x, "d_a": d_a, "d_s": d_s, "rank": rank, "imbalance": q, "kind": kind,
                         "n": n, **seeds})
        i += 1
    return problems


ZIPF = (0.0, 1.0, 2.0)
TIES = ("none", "half", "davidson")


def feature_grid(count: int = 15, seed: int = 9201) -> list[dict]:
    """``count`` problems of continuous features: every size and Zipf exponent in turn, the rest drawn."""
    rng = np.random.default_rng(seed)
    problems = []
    for i in range(count):
        rank = int(rng.choice(RANKS))
        problems.append({"n": SIZES[i % len(SIZES)], "zipf": ZIPF[(i // len(SIZES)) % len(ZIPF)],
                         "rank": rank,
                         "d_x": int(rng.integers(rank + 1, 12)), "d_phi": int(rng.integers(rank + 1, 16)),
                         "n_actions": int(rng.integers(4, 30)), "ties": TIES[int(rng.integers(len(TIES)))],
                         "weighted": bool(rng.random() < 0.25), "problem_seed": int(rng.integers(1000)),
                         "data_seed": int(rng.integers(1000))})
    return problems


def feature_data(p: dict) -> bl.PreferenceData:
    """One :func:`feature_grid` (or :func:`stranger_grid`) problem's comparisons.

    y ~ Bernoulli(σ(x_tᵀΘ*Δφ_t + b)), ties where |x_tᵀΘ*Δφ_t| is small.

    Optional keys (a stranger's): ``singular_values`` (Θ*'s range, default [0.5, 4]), ``contexts``
    ("gaussian", "groups": one-hot user groups of Zipf sizes, or "few_rows": 12 distinct rows) and
    ``position_bias`` (b, default 0: the first-shown action's log-odds bonus, which the model lacks).
    """
    rng = np.random.default_rng(p["problem_seed"])
    d_x, d_phi, rank = p["d_x"], p["d_phi"], p["rank"]
    left = np.linalg.qr(rng.standard_normal((d_x, rank)))[0]
    right = np.linalg.qr(rng.standard_normal((d_phi, rank)))[0]
    theta = left @ np.diag(np.sort(rng.uniform(*p.get("singular_values", (0.5, 4.0)), rank))[::-1]) @ right.T
    embeddings = rng.standard_normal((p["n_actions"], d_phi)) * 2 / np.sqrt(d_phi)
    scales = rng.uniform(0.3, 2.0, d_x - 1)
    frequency = np.arange(1, p["n_actions"] + 1) ** -p["zipf"]
    rng = np.random.default_rng(p["data_seed"])
    n = p["n"]
    contexts = p.get("contexts", "gaussian")
    if contexts == "groups":
        sizes = np.arange(1, d_x + 1.0) ** -1.0
        x = np.eye(d_x)[rng.choice(d_x, n, p=sizes / sizes.sum())]
    elif contexts == "few_rows":
        x = np.c_[np.ones(12), rng.standard_normal((12, d_x - 1)) * scales][rng.integers(0, 12, n)]
    else:
        x = np.c_[np.ones(n), rng.standard_normal((n, d_x - 1)) * scales]
    actions = rng.choice(p["n_actions"], (n, 2), p=frequency / frequency.sum())
    same = actions[:, 0] == actions[:, 1]
    actions[same, 1] = (actions[same, 1] + 1) % p["n_actions"]
    differences = embeddings[actions[:, 1]] - embeddings[actions[:, 0]]
    margin = np.einsum("ti,ij,tj->t", x, theta, differences)
    y = (rng.random(n) < expit(margin + p.get("position_bias", 0.0))).astype(float)
    if p["ties"] != "none":
        y[rng.random(n) < 0.25 * np.exp(-margin**2)] = 0.5
    weights = rng.uniform(0.5, 2.0, n) if p["weighted"] else None
    return bl.PreferenceData(x, differences, y, actions, weights=weights)


STRANGERS = ("wide", "strong", "weak", "over_ranked", "tiny", "groups", "rank_4_5", "no_context", "few_rows",
             "position_bias")


def stranger_grid(count: int = 20, seed: int = 9601) -> list[dict]:
    """``count`` :func:`feature_grid`-like problems of one family each, in turn (:data:`STRANGERS`).

    ``wide``: d_x 10–25, d_φ 10–30; ``strong``: Θ*'s singular values in [5, 15] (near separation);
    ``weak``: in [0.1, 0.6]; ``over_ranked``: Θ* of rank 1 fitted at 2 or 3 (``fit_rank``); ``tiny``:
    N 80–250; ``groups``: contexts one-hot user groups; ``rank_4_5``: r 4 or 5; ``no_context``: d_x = 1
    (a Bradley–Terry model of the features); ``few_rows``: 12 distinct contexts; ``position_bias``: the
    first-shown action wins with 0.8 more log-odds than Θ* says (a model that is wrong).
    """
    rng = np.random.default_rng(seed)
    problems = []
    for i in range(count):
        family = STRANGERS[i % len(STRANGERS)]
        rank = int(rng.choice(RANKS))
        p = {"family": family, "n": int(rng.choice((600, 1000, 2000, 4000))),
             "zipf": float(rng.choice(ZIPF)), "rank": rank,
             "d_x": int(rng.integers(rank + 1, 9)), "d_phi": int(rng.integers(rank + 1, 12)),
             "n_actions": int(rng.integers(4, 30)), "ties": TIES[int(rng.integers(len(TIES)))],
             "weighted": bool(rng.random() < 0.25), "problem_seed": int(rng.integers(1000)),
             "data_seed": int(rng.integers(1000))}
        if family == "wide":
            p |= {"d_x": int(rng.integers(10, 26)), "d_phi": int(rng.integers(10, 31))}
        elif family in ("strong", "weak"):
            p["singular_values"] = (5.0, 15.0) if family == "strong" else (0.1, 0.6)
        elif family == "over_ranked":
            p |= {"rank": 1, "fit_rank": min(rank + 1, 3)}
        elif family == "tiny":
            p["n"] = int(rng.integers(80, 251))
        elif family in ("groups", "few_rows"):
            p["contexts"] = family
        elif family == "rank_4_5":
            p["rank"] = int(rng.integers(4, 6))
            p |= {"d_x": int(rng.integers(p["rank"] + 1, 10)), "d_phi": int(rng.integers(p["rank"] + 1, 14))}
        elif family == "no_context":
            p |= {"rank": 1, "d_x": 1}
        else:
            p["position_bias"] = 0.8
        problems.append(p)
    return problems


def fit_row(data, rank: int, parametrization: str, args, ties: str = "half") -> dict:
    """One default-length fit; its diagnostics, what ran, and its ESS per second."""
    nuts = {"draws": args.draws, "tune": args.tune, "chains": args.chains, "parametrization": parametrization}
    samplers.clear_cache()  # each fit compiles its model, as the first fit of a process does
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = bb.fit_posterior(data, rank, ties=ties, nuts=nuts, progressbar=False, predictive_draws=0,
                                random_seed=args.seed)
    seconds = time.perf_counter() - t0
    d = post.diagnostics
    geometry = post.settings.get("geometry", {})
    r1 = post.settings["nuts"]["chart_rank"]
    ess = min(d.min_ess_bulk, d.min_ess_tail)
    return {"ran": "factored" if r1 is None else f"chart:{r1}", "fallback": bool(geometry.get("fell_back")),
            "target_accept": post.settings["nuts"]["target_accept"],
            "runs": 1 + len(geometry.get("fallbacks", [])),
            "divergences": d.divergences, "r_hat": d.max_rhat, "ess_bulk": d.min_ess_bulk,
            "ess_tail": d.min_ess_tail, "seconds": seconds, "ess_per_s": ess / seconds,
            "steps": float(post.tree["sample_stats"]["n_steps"].mean()), "converged": d.converged,
            "stopped_depth": geometry.get("stopped", {}).get("warmup_depth", np.nan),
            "compile_seconds": float(post.tree["posterior"].attrs.get("compile_time", np.nan))}


def problem_data(p: dict, family: str) -> tuple[bl.PreferenceData, str]:
    """A grid problem's comparisons and the tie model it is fitted with."""
    if family != "paper":
        return feature_data(p), "davidson" if p["ties"] == "davidson" else "half"
    problem = bl.simulate.paper_problem(p["d_s"], p["d_a"], p["d_x"], p["rank"], p["imbalance"],
                                        p["problem_seed"], theta_kind=p["kind"])
    return problem.sample(p["n"], seed=p["data_seed"]), "half"


GENERATORS = {"paper": grid, "features": feature_grid, "strangers": stranger_grid}
GRID_FILE = re.compile(r"robustness-(grid|features|strangers)(?:-(\d+))?\.csv")
FAMILY_OF_FILE = {"grid": "paper", "features": "features", "strangers": "strangers"}


def rerun_partial(out: Path, args) -> None:
    """Re-fit with the current default each recorded problem whose default ran a partial chart."""
    rows = []
    for path in sorted((Path(__file__).parents[1] / "docs" / "data").glob("robustness-*.csv")):
        match = GRID_FILE.fullmatch(path.name)
        if match is None:
            continue
        family, seed = FAMILY_OF_FILE[match[1]], int(match[2] or 2026)
        before = pd.read_csv(path)
        fit_rank = before["fit_rank"].fillna(before["rank"]) if "fit_rank" in before else before["rank"]
        chart_rank = before["default_ran"].str.extract(r"chart:(\d+)")[0].astype(float)
        for _, old in before[chart_rank < fit_rank].iterrows():
            i = int(old["problem"])
            p = GENERATORS[family](i + 1, seed)[i]
            data, ties = problem_data(p, family)
            rank = p.get("fit_rank", p["rank"])
            fit = fit_row(data, rank, "auto", args, ties)
            rows.append({"grid": path.name, "problem": i, "n": p["n"], "rank": rank,
                         **{f"default_{k}": v for k, v in fit.items()},
                         **{f"before_{k}": old[f"default_{k}"]
                            for k in ("ran", "divergences", "r_hat", "converged", "seconds")}})
            pd.DataFrame(rows).to_csv(out, index=False)
            print(f"{path.name} #{i} N={p['n']} {fit['ran']} div {fit['divergences']} R-hat "
                  f"{fit['r_hat']:.3f} ESS {fit['ess_bulk']:.0f} {fit['seconds']:.0f}s converged "
                  f"{fit['converged']} (before: {old['default_ran']}, R-hat {old['default_r_hat']:.3f})",
                  flush=True)
    table = pd.DataFrame(rows)
    good = (table["default_divergences"] == 0) & (table["default_r_hat"] <= 1.01)
    print(f"\ndefault: 0 divergences and R-hat <= 1.01 on {int(good.sum())} of {len(table)} partial-chart "
          f"problems; rows written to {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=tuple(GENERATORS), default="paper",
                        help="paper-simulation problems (the paper grid), continuous features, or the "
                             "features' strangers (ten families in turn)")
    parser.add_argument("--count", type=int, default=32)
    parser.add_argument("--grid-seed", type=int, default=2026,
                        help="the generator's seed: another value draws a grid of unseen problems")
    parser.add_argument("--problems", type=int, nargs="+", help="indices into the grid (default: all)")
    parser.add_argument("--n", type=int, help="every problem at this N (default: the grid's)")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="robustness_grid.csv")
    parser.add_argument("--rerun-partial", metavar="OUT",
                        help="re-fit the recorded grids' partial-chart problems with the default alone")
    args = parser.parse_args()
    if args.rerun_partial:
        rerun_partial(Path(args.rerun_partial), args)
        return
    features = args.family != "paper"
    problems = GENERATORS[args.family](args.count, args.grid_seed)
    if args.n is not None:
        problems = [p | {"n": args.n} for p in problems]
    wanted = range(len(problems)) if args.problems is None else args.problems
    out = Path(args.out)
    rows = pd.read_csv(out).to_dict("records") if out.exists() else []
    done = {int(r["problem"]) for r in rows}
    for i in wanted:
        if i in done:
            continue
        p = problems[i]
        data, ties = problem_data(p, args.family)
        rank = p.get("fit_rank", p["rank"])
        default = fit_row(data, rank, "auto", args, ties)
        # Where the default ran the factored model alone, "factored" is the same fit (same start, model and
        # seeds, the same draws): its row is the default's and the ratio is 1, not a second timing.
        same = default["ran"] == "factored" and not default["fallback"]
        factored = dict(default) if same else fit_row(data, rank, "factored", args, ties)
        row = {"problem": i, **p, **{f"default_{k}": v for k, v in default.items()},
               **{f"factored_{k}": v for k, v in factored.items()},
               "ratio": default["ess_per_s"] / factored["ess_per_s"]}
        rows.append(row)
        pd.DataFrame(rows).to_csv(out, index=False)
        shape = (f"{p.get('family', '')} zipf={p['zipf']:g} r={rank} {p['d_x']}x{p['d_phi']} "
                 f"{p['n_actions']} actions "
                 f"ties={p['ties']}{' weighted' if p['weighted'] else ''}" if features else
                 f"q={p['imbalance']:2d} r={p['rank']} {p['kind']:>8} {p['d_x']}x{p['d_a']}x{p['d_s']}")
        print(f"{i:3d} N={p['n']:6d} {shape}  default {default['ran']:>9}"
              f"{' fb' if default['fallback'] else ''}"
              f" div {default['divergences']:3d} R-hat {default['r_hat']:.3f} ESS {default['ess_bulk']:5.0f} "
              f"{default['seconds']:6.1f}s | factored div {factored['divergences']:3d} "
              f"R-hat {factored['r_hat']:.3f} ESS {factored['ess_bulk']:5.0f} {factored['seconds']:6.1f}s "
              f"| ratio {row['ratio']:.2f}", flush=True)
    table = pd.DataFrame(rows)
    good = (table["default_divergences"] == 0) & (table["default_r_hat"] <= 1.01)
    print(f"\ndefault: 0 divergences and R-hat <= 1.01 on {int(good.sum())} of {len(table)} problems "
          f"({good.mean():.0%}; bar 95%)")
    print(f"factored: 0 divergences and R-hat <= 1.01 on "
          f"{int(((table['factored_divergences'] == 0) & (table['factored_r_hat'] <= 1.01)).sum())}")
    print(f"smallest ESS/s ratio default/factored: {table['ratio'].min():.2f} (bar 0.8), "
          f"median {table['ratio'].median():.2f}")
    print(f"rows written to {out}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
